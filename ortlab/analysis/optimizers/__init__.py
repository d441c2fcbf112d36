"""What ORT's optimizers change: ``levels`` (graph-optimization levels, what fired and what it
is worth), ``ablation`` (one optimizer off at a time), ``transformers`` (ORT's transformers
optimizer with its parameters read from the graph)."""
