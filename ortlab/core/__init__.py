"""The pure core: what a model, its inputs and a session config *are*, and the plain-data
contract every result follows — no ORT session, no UI, no plotting.

Lives here: ``model`` (load, check, summarize), ``inputs`` (synthesize and validate feeds),
``config`` (SessionConfig), ``eps`` (execution-provider names, aliases, Memcpy and compiling
EPs), ``machine`` (CPU facts, the environment a result was measured in), ``runtime`` (what this
onnxruntime build accepts and which devices it sees, probed with a one-node model), ``stats``
(latency statistics and paired verdicts), ``result`` and ``display`` (the result contract and
the renderer registry the views fill), ``errors``, ``cache``, ``graph`` and ``onnx_util`` (ONNX
graph walking), ``examples`` and ``builder`` (bundled models).

May import: the standard library, numpy, onnx, msgspec, psutil (and onnxruntime for runtime
facts). Never another ortlab layer. A new concept every layer needs goes here.
"""
