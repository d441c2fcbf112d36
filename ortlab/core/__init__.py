"""The pure core: what a model, its inputs and a session config *are*, and the plain-data
contract every result follows — no ORT session, no UI, no plotting.

Lives here: ``model`` (load, check, summarize) with ``externaldata`` (the files beside it),
``run`` (the one ``Run`` value a verb is given, built once at its edge), ``decoder`` and
``decoderinputs`` (an LLM decoder's facts and its inputs by role), ``inputs`` (synthesize and
validate feeds),
``config`` (SessionConfig), ``eps`` (execution-provider names, aliases, Memcpy and compiling
EPs), ``machine`` (CPU facts, the environment a result was measured in), ``runtime`` (what this
onnxruntime build accepts and the devices it sees, as data: the engine measures them in the
worker and registers itself as their source), ``stats``
(latency statistics and paired verdicts), ``result`` and ``display`` (the result contract and
the renderer registry the views fill), ``errors``, ``cache``, ``graph`` and ``onnx_util`` (ONNX
graph walking), ``builder`` (the graph builder the bundled models use).

May import: the standard library, numpy, onnx, msgspec, psutil; never onnxruntime (an
import-linter contract) nor another ortlab layer. A new concept every layer needs goes here.
"""
