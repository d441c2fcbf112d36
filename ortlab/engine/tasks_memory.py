"""A session's memory as the operating system sees it: each config built and run in a fresh
process (:mod:`ortlab.engine._footprint_child`), round-robin, ``repeats`` times.

ORT's profile reports its own allocator (arena held, bytes in use); this is the independent
figure: the resident memory the session adds, which also counts the weights, prepacked
copies, and what the arena keeps after a run.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ortlab.core import cache
from ortlab.core.config import SessionConfig

__all__ = ["footprint"]

Progress = Callable[[int, int], None]
_TIMEOUT_S = 600.0
_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding the ortlab package


def _one(folder: Path, ask: dict[str, Any], k: int) -> dict[str, Any]:
    request, answer = folder / f"request{k}.pkl", folder / f"answer{k}.json"
    with request.open("wb") as f:
        pickle.dump(ask, f)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [_ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])}  # fmt: skip
    try:
        proc = subprocess.run(  # our own module, with this interpreter
            [sys.executable, "-m", "ortlab.engine._footprint_child", str(request), str(answer)],
            capture_output=True, cwd=folder, timeout=_TIMEOUT_S, check=False, env=env,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"error": f"the measurement took more than {_TIMEOUT_S:.0f} s"}
    if not answer.exists():
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
        return {"error": f"the process died (exit {proc.returncode}): " + " / ".join(tail)}
    out: dict[str, Any] = json.loads(answer.read_text())
    answer.unlink()
    return out


def footprint(
    items: Sequence[tuple[str, str, SessionConfig]],
    feeds: Mapping[str, Any],
    repeats: int,
    runs: int,
    progress: Progress,
) -> list[list[dict[str, Any]]]:
    """Per item (model path, name, config): one measurement per repeat. Items alternate within
    a repeat, so a machine getting busier touches them all alike."""
    out: list[list[dict[str, Any]]] = [[] for _ in items]
    total = len(items) * repeats
    with cache.temp_dir("footprint-") as folder:
        feeds_file = folder / "feeds.pkl"  # written once, read by every child
        with feeds_file.open("wb") as f:
            pickle.dump(dict(feeds), f)
        for r in range(repeats):
            for k, (path, name, config) in enumerate(items):
                ask = {"model_path": path, "name": name, "config": config,
                       "feeds_file": str(feeds_file), "runs": runs}  # fmt: skip
                out[k].append(_one(folder, ask, k))
                progress(r * len(items) + k + 1, total)
    return out
