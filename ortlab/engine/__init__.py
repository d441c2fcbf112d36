"""The engine: the only place ORT runs a model.

Lives here: ``calls`` (the caller side: normalise model/config/feeds, call the worker by
reference, surface fallbacks, ``measure_interleaved``), ``worker``, ``_worker_main`` and
``children`` (the isolated worker process and ortlab's own children), the tasks that run inside
it — ``tasks`` (profiled runs, placement sources, outputs), ``tasks_timing`` (benchmark and
interleaved rounds), ``tasks_transform`` (quantization, the transformers optimizer, error
statistics), ``tasks_whatif``, ``tasks_memory``, ``tasks_cost`` (shapes of one profiled run),
``tasks_peaks`` (the machine's ceilings), ``tasks_throughput`` — and ``replies`` (every task's
typed reply), ``session`` (building an InferenceSession and its report), ``plugins`` (plugin
EPs), ``probe`` (a node alone on an EP), ``verdicts`` (ORT's log verdicts kept), ``trace``
(ORT's profile format, parsed), ``capture`` (ORT's fd-level output) and ``venvs`` (one
virtual environment per onnxruntime version). The translation of a SessionConfig into ORT's
options lives in ``core.options``.

``runtime`` measures what the onnxruntime build accepts and sees (in the worker),
``providers`` asks the worker for it (``ortlab.providers()``) and is the core's source of
those facts; ``examples`` catalogues the bundled models and builds the zoo's (their BatchNorm
statistics come from one run in the worker), ``example_models`` the ones ortlab generates.

May import: ``ortlab.core``. A new execution provider's session handling goes in ``session``
and its options in ``core.options``; its names in ``core.eps``.
"""

from ortlab.engine import providers as _providers  # noqa: F401 - registers ORT's limits for the core
