"""Analyses: the public verbs that measure a model and return typed, plain-data results.

Lives here, by question; a feature that spans several modules has its own folder:
- how fast: ``benchmark`` (latency, ``compare_configs``), ``throughput`` (requests/s per
  concurrency), ``sweep`` (latency, placement and memory per shape), ``memory`` (footprint),
  ``generation/`` (an LLM decoder token by token: TTFT, tokens/s, the KV cache, by phase and
  layer, the roofline per phase);
- where the time goes: ``profiling`` (ProfileResult, its one maker ``profile_result``),
  ``perfetto`` (a profile as a trace file), ``diff`` (run against run per node), ``versions``
  (two onnxruntime versions node by node);
- where each node runs: ``placement/`` (the verb and its per-node join, why a node is not on
  the wanted EP, predicted placement on accelerators that are not here);
- what ORT's optimizers change: ``optimizers/`` (levels, ablation, the transformers optimizer);
- quantization: ``quantization/`` (the variants, where the error enters, output metrics, the
  variants side by side and why one is not faster);
- near the machine's limits: ``limits/`` (pure formulas, counts per node, the one home of this
  session's measured peaks, the roofline);
- the graph view's data: ``graph/`` (nodes and edges, the first picture's blocks, what shape
  inference says, optimized-to-original mapping, If/Loop scopes, the roofline per node);
- the Lab's runs without widgets: ``labrun``; the report's measurements: ``reportdata``.

May import: ``ortlab.engine`` and ``ortlab.core``. Never ``ortlab.views``: results render
through the registry in ``core.display``. A new result type goes here (or in ``diagnosis``)
with its renderers in ``views``.
"""
