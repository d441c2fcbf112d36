"""``python -m ortlab.cli``: the ``ortlab`` command."""

import sys

from ortlab.cli import main

sys.exit(main())
