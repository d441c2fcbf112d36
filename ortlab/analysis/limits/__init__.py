"""Near the machine's limits: ``formulas`` (pure FLOP and byte formulas per op), ``cost``
(counts per node at one run's shapes), ``ceilings`` (the one home of this session's measured
peaks), ``roofline`` (measured node times against both)."""
