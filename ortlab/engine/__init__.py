"""The engine: the only place ORT runs a model.

Lives here: ``calls`` (the caller side: normalise model/config/feeds, call the worker, surface
fallbacks), ``worker`` and ``_worker_main`` (the isolated worker process), ``tasks`` and
``tasks_transform`` (what runs inside it: timing loops, profiled runs, placement sources,
quantization, error statistics), ``session`` (building an InferenceSession and its report),
``options`` (the one translation of a SessionConfig into onnxruntime's options, shared with
every snippet), ``trace`` (ORT's profile format, parsed) and ``capture`` (ORT's fd-level logs).

``runtime`` measures what the onnxruntime build accepts and sees (in the worker),
``providers`` asks the worker for it (``ortlab.providers()``) and is the core's source of
those facts; ``examples`` builds the bundled models (their BatchNorm statistics come from one
run in the worker).

May import: ``ortlab.core``. A new execution provider's session handling goes in ``session``
and ``options``; its names in ``core.eps``.
"""

from ortlab.engine import providers as _providers  # noqa: F401 - registers ORT's limits for the core
