"""The doctor's memory on the corpus' largest fp16 image model (IS-Net, 1024x1024 fp16, 7 s a
run on 2 cores): the worker's resident peak (its child processes included) per doctor stage,
above the worker's idle size, beside one session's own peak in a fresh worker (built, run
twice: ORT's memory pattern allocates on the second run). The promise: about two sessions.

    python -m benchmarks.doctor_memory_large [budget_s]
"""

from __future__ import annotations

import sys
import time
from typing import Any

import ortlab
from benchmarks._common import RssWatch, record
from tests import corpus

MODEL = "isnet_fp16"


def _rss_mb(pid: int) -> int:
    import psutil

    return psutil.Process(pid).memory_info().rss >> 20


def _fresh_worker() -> Any:
    from ortlab.engine.worker import get_worker

    get_worker().stop()
    worker = get_worker()
    worker.call("ping", {})
    return worker


def main(budget_s: float) -> None:
    path = corpus.path(MODEL)
    worker = _fresh_worker()
    idle = _rss_mb(worker.pid)
    with RssWatch(worker.pid) as watch:
        ortlab.benchmark(path, runs=1, warmup=1, progress=False)
    session = watch.peak_mb() - idle
    worker = _fresh_worker()
    idle = _rss_mb(worker.pid)
    t0 = time.time()
    with RssWatch(worker.pid) as watch:
        d = ortlab.doctor(path, budget_s=budget_s, progress=False, memory=False)
    rows, at = [], t0
    for stage, seconds in d.stages.items():
        rows.append((stage, seconds, max(watch.peak_mb(at, at + seconds) - idle, 0)))
        at += seconds
    peak = watch.peak_mb() - idle
    lines = [
        f"One session (built, run twice): {session} MB above the worker's idle size. The doctor "
        f"(budget {budget_s:g} s, memory stage off: its fresh processes hold one session each) "
        f"peaked at {peak} MB = {peak / max(session, 1):.2f}x one session, in "
        f"{time.time() - t0:.0f} s.",
        "",
        "| stage | seconds | worker peak MB (above idle) |",
        "|---|---|---|",
        *(f"| {s} | {sec:.1f} | {mb} |" for s, sec, mb in rows),
        "",
        *(f"- note: {n[:300]}" for n in d.notes),
    ]
    record(
        "doctor_memory_large",
        {
            "model": MODEL,
            "budget_s": budget_s,
            "session_mb": session,
            "doctor_peak_mb": peak,
            "stages": [{"stage": s, "seconds": sec, "peak_mb": mb} for s, sec, mb in rows],
        },
        "\n".join(lines),
    )


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 120.0)
