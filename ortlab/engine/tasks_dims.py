"""Worker tasks reading what the graph says about its symbolic dims (ORT's symbolic shape
inference lives in onnxruntime, which the user's process never imports): which symbols it
broadcasts against each other, and what a run at given values needs at least."""

from __future__ import annotations

import functools

import onnx

from ortlab.core.run import Progress
from ortlab.engine.graphdims import footprint_at, merged_symbols
from ortlab.engine.replies import DimFacts
from ortlab.engine.sessioncache import file_fingerprint

__all__ = ["dim_facts"]


def dim_facts(
    progress: Progress,
    *,
    model_path: str,
    candidates: list[dict[str, int]],
    room: int,
    merges: bool,
) -> DimFacts:
    """With ``merges``, the symbols the graph unifies; then each candidate's footprint in turn,
    stopping at the first that fits in ``room`` bytes (the rest are not needed)."""
    proto = _graph(model_path, file_fingerprint(model_path))
    found = merged_symbols(proto) if merges else {}
    prints = []
    for k, values in enumerate(candidates):
        got = footprint_at(proto, values)
        prints.append(got)
        progress(k + 1, len(candidates))
        if got is None or got.peak_bytes <= room:
            break
    return DimFacts(merges=found, footprints=prints)


@functools.lru_cache(maxsize=1)  # one graph held: the worker stays near a session
def _graph(path: str, fingerprint: str) -> onnx.ModelProto:
    """The model's graph without external data, read once for a guess's two calls (the merges,
    then the shrunk candidates); a file changed since is read again (``fingerprint``)."""
    del fingerprint  # the cache key only
    return onnx.load(path, load_external_data=False)
