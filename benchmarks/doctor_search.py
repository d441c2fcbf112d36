"""The doctor's budgeted search against the exhaustive grid it prunes.

For each model: (1) the exhaustive grid — every optimization level x intra-op threads x spinning
x model variant (original, and the variants the doctor builds) — timed interleaved in chunks,
each chunk with the baseline so every ratio is paired; its best is the fastest configuration
whose outputs keep cosine ≥ 0.999. (2) ``ortlab.doctor`` with the default budget. (3) The
baseline, the grid's best and the doctor's best timed together, interleaved, so both speed-ups
come from the same rounds. Goal: the doctor reaches ≥ 95 % of the grid's speed-up in ≤ 1/3 of
its time.

    .venv/bin/python -m benchmarks.doctor_search [resnet50 bert_tiny]
"""

from __future__ import annotations

import itertools
import sys
import time
from typing import Any

import numpy as np

import ortlab
from benchmarks._common import record
from ortlab.analysis.quantization.compare import error_metrics
from ortlab.core.config import SessionConfig
from ortlab.core.stats import paired_ratio
from ortlab.engine import tasks, tasks_timing
from ortlab.engine.calls import Via
from ortlab.engine.calls import run as run_task

LEVELS = ("disabled", "basic", "extended", "all")
THREADS = (0, 1, 2)
SPIN = (None, False)
CHUNK = 12
MIN_COSINE = 0.999


def _time(items: list[tuple[str, str, SessionConfig]], feeds: Any, rounds: int, runs: int) -> Any:
    via = Via("grid", "grid")
    out = run_task(
        tasks_timing.interleaved, via, items=items, feeds=dict(feeds), rounds=rounds, runs=runs
    )
    return np.asarray(out.medians_ns, dtype=np.float64) / 1e6


def _cosine(m: ortlab.Model, v: ortlab.Model, samples: list[dict[str, Any]]) -> float:
    via = Via("outputs", "grid")
    outs = [
        run_task(
            tasks.outputs_many,
            via,
            model_path=str(x.path),
            model_name=x.name,
            config=SessionConfig(),
            samples=samples,
        )
        for x in (m, v)
    ]
    return min(
        float(error_metrics([o[k] for o in outs[0]], [o[k] for o in outs[1]])["cosine"])
        for k in outs[0][0]
    )


def grid(m: ortlab.Model, variants: list[ortlab.Model], runs: int, rounds: int) -> dict[str, Any]:
    feeds = m.example_inputs()
    samples = [dict(m.example_inputs(seed=100 + i)) for i in range(4)]
    accurate = [m] + [v for v in variants if _cosine(m, v, samples) >= MIN_COSINE]
    configs = [
        SessionConfig(level=lv, intra_op_threads=t, allow_spinning=s, fallback="allow")
        for lv, t, s in itertools.product(LEVELS, THREADS, SPIN)
    ]
    base = (str(m.path), m.name, SessionConfig(fallback="allow"))
    cells = [(str(v.path), v.name, c) for v in [m, *variants] for c in configs]
    cells = [c for c in cells if c != base]
    t0 = time.perf_counter()
    ratios: dict[tuple[str, str, SessionConfig], float] = {}
    for i in range(0, len(cells), CHUNK):
        chunk = cells[i : i + CHUNK]
        med = _time([base, *chunk], feeds, rounds, runs)
        for k, cell in enumerate(chunk, start=1):
            ratios[cell] = paired_ratio(med[:, 0], med[:, k]).ratio
    elapsed = time.perf_counter() - t0
    ok_paths = {str(v.path) for v in accurate}
    best = min((c for c in ratios if c[0] in ok_paths), key=lambda c: ratios[c])
    return {"cells": len(cells) + 1, "seconds": elapsed, "best": best, "ratio": ratios[best]}


def run(name: str) -> dict[str, Any]:
    import shutil

    from ortlab.core import cache

    m = ortlab.examples.load(name)
    for folder in ("variants", "transformers"):  # the doctor builds its variants cold
        shutil.rmtree(cache.cache_dir() / folder, ignore_errors=True)
    t0 = time.perf_counter()
    d = ortlab.doctor(m, progress=False)
    doctor_s = time.perf_counter() - t0
    variants = [
        ortlab.load(x.model_path)
        for x in d.measured
        if x.key.startswith("variant:") and x.stage == "screen"
    ]
    runs = max(3, min(200, int(np.ceil(30 / d.baseline_ms))))
    g = grid(m, variants, runs=runs, rounds=6)
    # the grid needs the same variants: their build time (measured in the doctor) counts for both
    g["seconds"] += d.stages.get("build variants", 0.0)
    best_cfg = d.best.config.with_(fallback="allow")
    items = [
        (str(m.path), m.name, SessionConfig(fallback="allow")),
        g["best"],
        (d.best.model_path, "doctor-best", best_cfg),
    ]
    med = _time(items, m.example_inputs(), rounds=15, runs=runs)
    grid_v = paired_ratio(med[:, 0], med[:, 1])
    doc_v = paired_ratio(med[:, 0], med[:, 2])
    reach = grid_v.ratio / doc_v.ratio  # doctor speed-up / grid speed-up
    print(
        f"{name}: grid {g['cells']} cells in {g['seconds']:.0f} s, doctor {doctor_s:.0f} s; "
        f"grid best {grid_v}; doctor best {doc_v}"
    )
    return {
        "model": name,
        "baseline_ms": d.baseline_ms,
        "grid_cells": g["cells"],
        "grid_s": g["seconds"],
        "grid_best": f"{ortlab.load(g['best'][0]).name} · {g['best'][2].label()}",
        "grid_speedup": grid_v.speedup(),
        "grid_ci": [1 / grid_v.high, 1 / grid_v.low],
        "doctor_s": doctor_s,
        "doctor_candidates": len(d.measured),
        "doctor_best": f"{d.best.variant} · {d.best.config.label()}",
        "doctor_speedup": doc_v.speedup(),
        "doctor_ci": [1 / doc_v.high, 1 / doc_v.low],
        "doctor_cosine": d.best.cosine,
        "doctor_stages": d.stages,
        "reach": reach,
        "time_fraction": doctor_s / g["seconds"],
    }


def main(names: list[str]) -> None:
    rows = [run(n) for n in names]
    lines = [
        "| model | grid: cells, time | grid best (speed-up, 95 % CI) | doctor: candidates, time "
        "| doctor best (speed-up, 95 % CI, cosine) | reach | time |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['grid_cells']}, {r['grid_s']:.0f} s | {r['grid_best']} "
            f"({r['grid_speedup']:.2f}x [{r['grid_ci'][0]:.2f}, {r['grid_ci'][1]:.2f}]) | "
            f"{r['doctor_candidates']}, {r['doctor_s']:.0f} s | {r['doctor_best']} "
            f"({r['doctor_speedup']:.2f}x [{r['doctor_ci'][0]:.2f}, {r['doctor_ci'][1]:.2f}], "
            f"{r['doctor_cosine']:.4f}) | {r['reach']:.0%} | {r['time_fraction']:.2f} |"
        )
    lines += [
        "",
        "Speed-ups are against the default session (level all, ORT's threads), from one final "
        "interleaved run of baseline, grid best and doctor best (15 rounds). *reach* = doctor "
        "speed-up / grid speed-up (goal ≥ 95 %); *time* = doctor time / grid time (goal ≤ 0.33). "
        "The grid is levels × intra-op threads {0, 1, 2} × spinning {default, off} × variants "
        "(original and the doctor's variants), timed in chunks of 12 paired with the baseline; "
        "its best keeps cosine ≥ 0.999 (synthetic inputs). Both times include building the "
        "variants (quantization, transformers optimizer) from a cold cache.",
    ]
    lines += ["", "Where the doctor's time went (s):", ""]
    lines += [
        f"- {r['model']}: " + ", ".join(f"{k} {v:.1f}" for k, v in r["doctor_stages"].items())
        for r in rows
    ]
    record("doctor_search", {"rows": rows}, "\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:] or ["resnet50", "bert_tiny"])
