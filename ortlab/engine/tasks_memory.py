"""A session's memory as the operating system sees it: each config built and run in a fresh
process (:mod:`ortlab.engine._footprint_child`), round-robin, ``repeats`` times.

ORT's profile reports its own allocator (arena held, bytes in use); this is the independent
figure: the resident memory the session adds, which also counts the weights, prepacked
copies, and what the arena keeps after a run.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Sequence
from pathlib import Path

from ortlab.core import cache
from ortlab.core.config import SessionConfig
from ortlab.core.inputs import FeedsLike
from ortlab.core.run import Progress
from ortlab.engine.children import ChildFailed, FootprintAsk, run_child
from ortlab.engine.replies import FootprintSample

__all__ = ["footprint"]

_TIMEOUT_S = 600.0


def _one(folder: Path, ask: FootprintAsk, k: int) -> FootprintSample:
    request, answer = folder / f"request{k}.pkl", folder / f"answer{k}.json"
    with request.open("wb") as f:
        pickle.dump(ask, f)
    argv = [sys.executable, "-m", "ortlab.engine._footprint_child", str(request), str(answer)]
    try:
        got = run_child(argv, answer, cwd=folder, timeout=_TIMEOUT_S, what="the measurement")
    except ChildFailed as err:
        return FootprintSample(error=str(err))
    return FootprintSample(**got)


def footprint(
    progress: Progress,
    *,
    items: Sequence[tuple[str, str, SessionConfig]],
    feeds: FeedsLike,
    repeats: int,
    runs: int,
) -> list[list[FootprintSample]]:
    """Per item (model path, name, config): one measurement per repeat. Items alternate within
    a repeat, so a machine getting busier touches them all alike."""
    out: list[list[FootprintSample]] = [[] for _ in items]
    total = len(items) * repeats
    with cache.temp_dir("footprint-") as folder:
        feeds_file = folder / "feeds.pkl"  # written once, read by every child
        with feeds_file.open("wb") as f:
            pickle.dump(dict(feeds), f)
        for r in range(repeats):
            for k, (path, name, config) in enumerate(items):
                ask: FootprintAsk = {
                    "model_path": path,
                    "name": name,
                    "config": config,
                    "feeds_file": str(feeds_file),
                    "runs": runs,
                }
                out[k].append(_one(folder, ask, k))
                progress(r * len(items) + k + 1, total)
    return out
