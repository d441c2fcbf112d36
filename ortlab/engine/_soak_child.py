"""One soak setting, in a process of its own: ``python -m ortlab.engine._soak_child request.pkl
answer.json``.

The child builds the session once with the setting (the arena off, shrunk after each run,
or extended by what is asked: ``kSameAsRequested`` through an allocator registered in the
environment), then runs it phase after phase — the same inputs, fresh values of the same
shapes, fresh shapes (each run's free dims drawn between their values and twice them, the
largest first, so a healthy allocator has seen the most it needs before the fit begins) — and
after every run notes its resident set and the bytes ORT's arena
has extended by so far. Those come from ORT's own log: with the default logger at INFO,
onnxruntime 1.31 writes "Extended allocation by N bytes" to the process's stderr each time the
BFC arena grows, and the child's stderr is a file it reads back. A process of its own, because
memory freed rarely goes back to the system: another setting's leftovers would read as growth.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnxruntime as ort

    from ortlab.engine.children import SoakAsk

_EXTENDED = re.compile(rb"Extended allocation by (\d+) bytes")
SHAPES_SEED = 0
"""The fresh shapes' draws: the same sequence under every setting."""
LOW_MEMORY = 0.15
"""A phase stops early when less than this share of the machine's memory is left."""


class ArenaLog:
    """The bytes ORT's arena extended by, read from the process's stderr (a file)."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("rb")
        self.total = 0

    def read(self) -> int:
        self.total += sum(int(n) for n in _EXTENDED.findall(self.file.read()))
        return self.total


def _fresh_values(feeds: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The same shapes with their values shuffled: every value stays one the model accepts
    (ids in range, a mask of ones), the buffers are new."""
    return {k: rng.permutation(v.reshape(-1)).reshape(v.shape) for k, v in feeds.items()}


def _session(ask: SoakAsk) -> tuple[ort.InferenceSession, ort.RunOptions | None]:
    import onnxruntime as ort

    from ortlab.engine.session import build_session

    ort.set_default_logger_severity(1)  # INFO: the arena says each time it extends
    config = ask["config"]
    entries: dict[str, str] = {}
    if ask["same_as_requested"]:
        arena = ort.OrtArenaCfg(0, 1, -1, -1)  # max_mem 0: no cap; 1: kSameAsRequested
        kind, mem = ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, ort.OrtMemType.DEFAULT
        info = ort.OrtMemoryInfo("Cpu", kind, 0, mem)
        ort.create_and_register_allocator(info, arena)
        entries["session.use_env_allocators"] = "1"
    sess, _ = build_session(
        ask["model_path"], config, model_name=ask["name"], log_severity=1, extra_entries=entries
    )
    options: ort.RunOptions | None = None
    if ask["shrink"]:
        options = ort.RunOptions()
        options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return sess, options


def soak(ask: SoakAsk, log: ArenaLog) -> list[dict[str, object]]:
    import psutil

    from ortlab.core.inputs import example_inputs
    from ortlab.core.model import load
    from ortlab.engine.tasks import prepare_feeds

    sess, options = _session(ask)
    proc = psutil.Process()
    base = ask["feeds"]
    rng = np.random.default_rng(ask["seed"])
    sizes = np.random.default_rng(SHAPES_SEED)  # every setting sees the same shapes
    model = load(ask["model_path"]) if ask["shapes"] else None
    out: list[dict[str, object]] = []
    for phase in ask["phases"]:
        rss: list[int] = []
        arena: list[int] = []
        note = ""
        for i in range(int(ask["runs"])):
            if phase == "same inputs":
                feeds = base
            elif phase == "fresh inputs":
                feeds = _fresh_values(base, rng)
            else:  # fresh shapes: every free dim drawn anew between its value and twice it
                assert model is not None  # (the largest first: what a run needs at most)
                scale = 2.0 if i == 0 else 1 + float(sizes.uniform())
                dims = {d: max(1, round(v * scale)) for d, v in ask["dims"].items()}
                feeds = dict(example_inputs(model.signature, dims=dims, seed=i))
            sess.run(None, prepare_feeds(feeds), options)
            rss.append(int(proc.memory_info().rss))
            arena.append(log.read())
            left = psutil.virtual_memory()
            if left.available < LOW_MEMORY * left.total:
                note = (
                    f"stopped after {i + 1} runs: {left.available / 1e9:.1f} GB of "
                    f"{left.total / 1e9:.1f} GB left"
                )
                break
        out.append({"phase": phase, "rss": rss, "arena": arena, "note": note})
    return out


def main(request: str, answer: str) -> None:
    with Path(request).open("rb") as f:
        ask = pickle.load(f)  # our own request file, written by the worker
    log_path = Path(answer).with_suffix(".log")
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)  # ORT's log: the arena's extensions
    out: dict[str, object]
    try:
        out = {"series": soak(ask, ArenaLog(log_path)), "error": ""}
    except Exception as err:  # noqa: BLE001 - the failure is the answer
        out = {"series": [], "error": f"{type(err).__name__}: {err}"[:600]}
    Path(answer).write_text(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
