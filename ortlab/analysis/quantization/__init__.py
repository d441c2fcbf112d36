"""Quantization: ``quantize`` (the variants ORT's quantizer makes, and what it refuses),
``error`` (where the error enters, node by node), ``metrics`` (output error, degenerate cases
named), ``compare`` (variants side by side) and ``variants`` (one row each, and why a
variant is not faster)."""
