"""The machine's peaks measured with ORT against the CPU's published figures, and what each of the
"why is it slow" verbs costs.

1. Peaks: ``engine.tasks_peaks.peaks`` (a 1024-square GEMM per precision, a streaming Add, an
   Add inside each cache level) in the worker under the default session settings, against the
   theoretical peak cores x FLOPs per cycle x clock. The FLOPs per cycle are the core's
   published figures (an AMD Zen 4 core: two 256-bit FMA pipes, so 32 fp32 FLOPs and, with
   AVX-512 VNNI, 128 int8 operations a cycle); the clock is what /proc/cpuinfo reports (the
   boost clock of a cloud VM is not published, so the ratio is an upper estimate of the
   efficiency).
2. Verbs: cost, roofline, throughput, sweep and a Perfetto export on the bundled models, timed
   in rounds (each verb once a round, order reversed every other round), as a multiple of one
   model run (the median of a plain benchmark taken in the same rounds).

    python -m benchmarks.limits [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import ortlab
from benchmarks._common import record
from ortlab.analysis.limits.ceilings import is_bandwidth
from ortlab.core.config import SessionConfig
from ortlab.engine import tasks_peaks
from ortlab.engine.calls import Via
from ortlab.engine.calls import run as run_task

FLOPS_PER_CYCLE = {"fp32": 32, "int8": 128}
"""Per core per cycle, AMD Zen 4 (two 256-bit FMA pipes; VNNI dot products of 4 int8 pairs)."""


def _clock_hz() -> float:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("cpu MHz"):
            return float(line.split(":")[1]) * 1e6
    return float("nan")


def peaks(runs: int) -> tuple[list[dict[str, Any]], str]:
    reply = run_task(
        tasks_peaks.peaks,
        Via("peaks", "of this machine"),
        config=SessionConfig(),
        dtypes=["fp32", "int8", "fp16"],
        runs=runs,
    )
    cores, clock = os.cpu_count() or 1, _clock_hz()
    rows, lines = (
        [],
        [
            "| ceiling | best | median | published (cores x per cycle x clock) | "
            "best / published |",
            "|---|---|---|---|---|",
        ],
    )
    for p in reply.runs:
        rates = [p.work / s for s in p.seconds]
        best = max(rates) if rates else float("nan")
        median = float(np.median(rates)) if rates else float("nan")
        published = cores * FLOPS_PER_CYCLE[p.dtype] * clock if p.dtype in FLOPS_PER_CYCLE else None
        unit = "GB/s" if is_bandwidth(p.dtype) else "GOP/s" if p.dtype == "int8" else "GFLOP/s"
        scale = 1e9
        rows.append(
            {
                "what": p.what,
                "dtype": p.dtype,
                "best": best,
                "median": median,
                "published": published,
                "runs": len(rates),
                "error": p.error,
            }
        )
        if p.error:
            lines.append(f"| {p.what} | not measured: {p.error} | | | |")
            continue
        pub = "not published for a VM slice"
        if published:
            pub = (
                f"{published / scale:.0f} {unit} ({cores} x {FLOPS_PER_CYCLE[p.dtype]} x "
                f"{clock / 1e9:.2f} GHz)"
            )
        ratio = f"{best / published:.0%}" if published else ""
        lines.append(
            f"| {p.what} | {best / scale:.1f} {unit} | {median / scale:.1f} {unit} | "
            f"{pub} | {ratio} |"
        )
    lines += [
        "",
        f"The clock is the one /proc/cpuinfo reports ({clock / 1e9:.2f} GHz, the base "
        "clock); the cores boost above it under load (a Zen 4 EPYC up to about 3.7 GHz), so "
        "a ratio above 100 % means the kernel ran at a boosted clock, and the published "
        "peak at the boost clock is about 1.4x the figure shown. Best is the fastest of "
        "the runs, median their middle: each GEMM run follows a streaming Add, which "
        "evicts its weights, so the spread is wide.",
    ]
    return rows, "\n".join(lines)


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def verbs(rounds: int) -> tuple[list[dict[str, Any]], str]:
    resnet = ortlab.examples.load("resnet50")
    bert = ortlab.examples.load("bert_tiny")
    folder = Path(tempfile.mkdtemp())
    prof = ortlab.profile(resnet, runs=20, progress=False)
    jobs: dict[str, Callable[[], Any]] = {
        "benchmark resnet50 (20 runs)": lambda: ortlab.benchmark(
            resnet, runs=20, warmup=3, progress=False
        ),
        "cost resnet50": lambda: ortlab.cost(resnet, progress=False),
        "roofline resnet50 (20 runs)": lambda: ortlab.roofline(resnet, runs=20, progress=False),
        "throughput resnet50 (1, 2 shared, 6 x 0.5 s)": lambda: ortlab.throughput(
            resnet, concurrency=[1, 2], modes=["shared"], duration_s=0.5, progress=False
        ),
        "sweep bert_tiny (3 shapes, 30 runs)": lambda: ortlab.sweep(
            bert, dims={"sequence": [16, 64, 128]}, progress=False
        ),
        "to_perfetto resnet50 (20 runs)": lambda: prof.to_perfetto(folder / "r.json", model=resnet),
    }
    times: dict[str, list[float]] = {k: [] for k in jobs}
    for r in range(rounds):
        for name in list(jobs) if r % 2 == 0 else list(reversed(jobs)):
            times[name].append(_timed(jobs[name]))
    run_ms = ortlab.benchmark(resnet, runs=50, progress=False).stats.p50_ms
    rows, lines = (
        [],
        [
            f"ResNet-50 p50 {run_ms:.1f} ms a run (profiling off).",
            "",
            "| verb | median s | min..max s | x one model run |",
            "|---|---|---|---|",
        ],
    )
    for name, ts in times.items():
        med = float(np.median(ts))
        rows.append({"verb": name, "median_s": med, "runs_s": ts})
        lines.append(
            f"| {name} | {med:.2f} | {min(ts):.2f}..{max(ts):.2f} | {med * 1e3 / run_ms:.0f} |"
        )
    return rows, "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--peak-runs", type=int, default=20)
    args = ap.parse_args()
    peak_rows, peak_md = peaks(args.peak_runs)
    verb_rows, verb_md = verbs(args.rounds)
    record(
        "limits",
        {"peaks": peak_rows, "verbs": verb_rows},
        "## Peaks measured with ORT vs the CPU's published figures\n\n"
        + peak_md
        + "\n\n## What each verb costs\n\n"
        + verb_md,
    )


if __name__ == "__main__":
    main()
