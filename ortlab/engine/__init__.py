"""The engine: the only place ORT runs a model.

Lives here: ``calls`` (the caller side: normalise model/config/feeds, call the worker, surface
fallbacks), ``worker`` and ``_worker_main`` (the isolated worker process), ``tasks`` and
``tasks_transform`` (what runs inside it: timing loops, profiled runs, placement sources,
quantization, error statistics), ``session`` (building an InferenceSession and its report),
``options`` (the one translation of a SessionConfig into onnxruntime's options, shared with
every snippet), ``trace`` (ORT's profile format, parsed) and ``capture`` (ORT's fd-level logs).

May import: ``ortlab.core``. A new execution provider's session handling goes in ``session``
and ``options``; its names in ``core.eps``.
"""
