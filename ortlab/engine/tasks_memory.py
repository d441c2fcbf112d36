"""A session's memory as the operating system sees it: each config built and run in a process
of its own (:mod:`ortlab.engine._footprint_child`: forked by a measuring process started for
the repeat), round-robin, ``repeats`` times.

ORT's profile reports its own allocator (arena held, bytes in use); this is the independent
figure: the resident memory the session adds, which also counts the weights, prepacked
copies, and what the arena keeps after a run.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import numpy as np

from ortlab.core import cache
from ortlab.core.config import SessionConfig
from ortlab.core.inputs import FeedsLike
from ortlab.core.machine import BUSY_CORES, measured_load
from ortlab.core.run import Progress
from ortlab.engine.children import ChildFailed, FootprintAsk, child_env, run_child
from ortlab.engine.replies import FootprintSample, SoakPhase, SoakSetting

__all__ = ["Measurer", "footprint", "measurer", "soak"]

_TIMEOUT_S = 600.0
_CHILD = "ortlab.engine._footprint_child"


class Measurer:
    """Measures a request in a process of its own: a child forked by the measuring process
    (``server``); each measurement fails with ``refused`` when that process cannot fork."""

    def __init__(self, folder: Path, server: subprocess.Popen[str], refused: str = "") -> None:
        self.folder, self.server, self.refused = folder, server, refused

    def __call__(self, ask: FootprintAsk, k: int, timeout_s: float = _TIMEOUT_S) -> FootprintSample:
        if self.refused:
            return FootprintSample(
                error=f"the footprint's measuring process cannot fork here: {self.refused}"
            )
        request, answer = self.folder / f"request{k}.pkl", self.folder / f"answer{k}.json"
        with request.open("wb") as f:
            pickle.dump(ask, f)
        return self._forked(request, answer, timeout_s)

    def _forked(self, request: Path, answer: Path, timeout_s: float) -> FootprintSample:
        assert self.server.stdin and self.server.stdout
        log = answer.with_suffix(".log")
        line = {
            "request": str(request),
            "answer": str(answer),
            "log": str(log),
            "timeout_s": timeout_s,
        }
        try:
            self.server.stdin.write(json.dumps(line) + "\n")
            self.server.stdin.flush()
            said = self.server.stdout.readline().strip()
        except OSError as err:  # the measuring process is gone: a broken pipe
            said = f"gone ({err})"
        if said == "exit 0" and answer.exists():
            got = json.loads(answer.read_text())
            answer.unlink()
            return FootprintSample(**got)
        if said == "timeout":
            return FootprintSample(error=f"the measurement took more than {timeout_s:.0f} s")
        tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
        why = said or "the measuring process ended"
        return FootprintSample(error=f"the measurement died ({why}): " + " / ".join(tail))


@contextmanager
def measurer(folder: Path) -> Iterator[Measurer]:
    """A :class:`Measurer` whose measuring process (started here: one interpreter's start-up
    for every measurement it forks) ends when the block ends. OpenBLAS is held to one thread
    in it: numpy's import would start a thread that forking cannot carry.

    Start one per repeat, not one per call: a process's state after its imports (where its
    heap and libraries landed) moved resnet50's resident figure by 24 MB between fresh
    interpreters, and every child forked from one server inherits that one state, so
    repeats forked from one server would look more alike than the model's sessions are.
    One server per repeat keeps the repeats independent, as fresh interpreters were, while
    the settings of a repeat share its state."""
    errors = (folder / "server.log").open("w")
    try:
        server = subprocess.Popen(  # our own module, with this interpreter
            [sys.executable, "-m", _CHILD, "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            cwd=folder,
            env=child_env(OPENBLAS_NUM_THREADS="1"),
            text=True,
        )
    except BaseException:  # it never started: its log is closed here, not left open
        errors.close()
        raise
    try:
        assert server.stdout is not None
        ready = server.stdout.readline().strip()
        refused = "" if ready == "fork" else ready.removeprefix("no fork: ") or "it ended"
        yield Measurer(folder, server, refused)
    finally:
        _close(server, errors)


def _close(server: subprocess.Popen[str], errors: IO[str]) -> None:
    if server.stdin is not None:
        server.stdin.close()  # its loop ends at the end of its input
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    if server.stdout is not None:  # its pipe, read to its end or not: closed, not left to gc
        server.stdout.close()
    errors.close()


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
            with measurer(folder) as measure:  # a new one each repeat: see measurer
                for k, (path, name, config) in enumerate(items):
                    ask: FootprintAsk = {
                        "model_path": path,
                        "name": name,
                        "config": config,
                        "feeds_file": str(feeds_file),
                        "runs": runs,
                    }
                    out[k].append(measure(ask, k))
                    progress(r * len(items) + k + 1, total)
    return out


SOAK_CHILD = "ortlab.engine._soak_child"


def _soaked(stem: Path, ask: dict[str, object], label: str, timeout_s: float) -> SoakSetting:
    """One setting's soak in a process of its own, with the cores other processes used while
    it ran."""
    request, answer = stem.with_suffix(".pkl"), stem.with_suffix(".json")
    with request.open("wb") as f:
        pickle.dump(ask, f)
    argv = [sys.executable, "-m", SOAK_CHILD, str(request), str(answer)]
    with measured_load() as load:
        try:
            got = run_child(argv, answer, cwd=stem.parent, timeout=timeout_s, what=f"soak {label}")
        except ChildFailed as err:
            got = {"series": [], "error": str(err)}
    series = [SoakPhase(**x) for x in got.get("series") or []]
    return SoakSetting(label, series, str(got.get("error", "")), load.cores)


def soak(
    progress: Progress,
    *,
    model_path: str,
    name: str,
    settings: Sequence[tuple[str, SessionConfig, bool, bool]],
    feeds: FeedsLike,
    dims: dict[str, int],
    phases: Sequence[str],
    runs: int,
    timeout_s: float,
    again_if_busy: bool = True,
) -> list[SoakSetting]:
    """Per setting (label, config, shrink the arena after each run, extend it by what is
    asked): its phases' resident set and arena extensions after every run, measured in a
    process of its own (:mod:`ortlab.engine._soak_child`), one setting after another, with the
    cores other processes used meanwhile. Where they kept the machine busy (more than
    BUSY_CORES) and ``again_if_busy``, the setting is measured once more and the less loaded
    measurement kept: whether memory the arena gave back is taken again run after run depends
    on which of ORT's threads ran what, and so on the machine's load."""
    out: list[SoakSetting] = []
    with cache.temp_dir("soak-") as folder:
        for k, (label, config, shrink, same) in enumerate(settings):
            ask = {
                "model_path": model_path,
                "name": name,
                "config": config,
                "shrink": shrink,
                "same_as_requested": same,
                "feeds": {n: np.asarray(v) for n, v in dict(feeds).items()},
                "dims": dims,
                "shapes": "fresh shapes" in phases,
                "phases": list(phases),
                "runs": runs,
                "seed": k,
            }
            got = _soaked(folder / f"setting{k}", ask, label, timeout_s)
            if again_if_busy and (got.other_cores or 0.0) > BUSY_CORES:
                again = _soaked(folder / f"setting{k}-again", ask, label, timeout_s)
                calmer = min(got, again, key=lambda x: x.other_cores or 0.0)
                got = dataclasses.replace(calmer, measured=2)
            out.append(got)
            progress(k + 1, len(settings))
    return out
