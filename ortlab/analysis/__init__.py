"""Analyses: the public verbs that measure a model and return typed, plain-data results.

Lives here: ``benchmark`` (latency, config comparisons), ``profiling`` (ProfileResult),
``placement`` and ``graphmap`` (the per-node join of original graph, final graph, EP and time),
``optimization`` and ``transformer_opt`` (what ORT's optimizers change), ``quantization``,
``quant_error`` and ``compare`` (variants, their error and speed), ``signals`` (why a variant is
not faster), ``graphdata`` (the model as data for the graph view).

May import: ``ortlab.engine`` and ``ortlab.core``. Never ``ortlab.views``: results render
through the registry in ``core.display``. A new result type goes here (or in ``diagnosis``)
with its renderers in ``views``.
"""
