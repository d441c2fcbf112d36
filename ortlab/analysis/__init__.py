"""Analyses: the public verbs that measure a model and return typed, plain-data results.

Lives here, by question:
- how fast: ``benchmark`` (latency, ``compare_configs``), ``throughput`` (requests/s per
  concurrency), ``sweep`` (latency, placement and memory per shape), ``memory`` (footprint),
  ``generate`` (an LLM decoder token by token: TTFT, tokens/s, the KV cache, by phase/layer);
- where the time goes: ``profiling`` (ProfileResult, its one maker ``profile_result``),
  ``perfetto`` (a profile as a trace file), ``diff`` (run against run per node), ``versions``
  (two onnxruntime versions node by node);
- where each node runs: ``placement`` with ``placementresult`` and ``graphmap`` (the per-node
  join of original graph, final graph, EP and time; ``graphscopes``: scope by scope, the If
  branch that ran), ``reasons`` (why a node is not on the wanted EP), ``whatif`` with
  ``whatifresult`` (predicted placement on accelerators that are not here);
- what ORT's optimizers change: ``optimization``, ``ablation``, ``transformer_opt``;
- quantization: ``quantization`` (variants), ``quant_error``, ``compare`` and ``variants``
  (their error and speed, and why one is not faster), ``metrics`` (output error);
- near the machine's limits: ``costmodel`` (pure formulas), ``cost`` (counts per node),
  ``ceilings`` (the one home of this session's measured peaks), ``roofline``;
- the graph view's data: ``graphdata``, ``graphblocks`` (its first picture), ``graphroof``;
- the Lab's runs without widgets: ``labrun``; the report's measurements: ``reportdata``.

May import: ``ortlab.engine`` and ``ortlab.core``. Never ``ortlab.views``: results render
through the registry in ``core.display``. A new result type goes here (or in ``diagnosis``)
with its renderers in ``views``.
"""
