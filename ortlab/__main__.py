"""`python -m ortlab`: the ortlab command (as `ortlab` on the PATH)."""

from ortlab.cli import main

raise SystemExit(main())
