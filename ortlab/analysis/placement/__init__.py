"""Where each node runs: ``measure`` (the ``placement`` verb), ``result`` (its result and
per-node join), ``reasons`` (why a node is not on the wanted EP), ``whatif`` and
``whatifresult`` (predicted placement on accelerators that are not here)."""
