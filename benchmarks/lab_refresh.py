"""Time from a Lab toggle to refreshed views on ResNet-50 (176 nodes), YOLOv8n (an Ultralytics
export) and a real 1,493-node Paddle export (PicoDet), split into ORT's own time and ortlab's
overhead.

ORT's time is what the worker measured around ORT's own calls: both session builds (the
benchmark's only when not reused), every run of both (warm-up included) and end_profiling.
Everything else is ortlab's overhead: the worker round trips, parsing, the join, graph data,
figures, widget updates. The first refresh (the Lab's own, at construction, in a fresh
process: each model and tab runs in a process of its own) is listed too, and the
constructor's whole wall time with ortlab's share of it: the constructor loads plotly's
figure code and collects garbage before the first run (never beside ORT's timed runs), so
the first refresh alone does not say everything the user waits for.

A run draws the tab on screen; the others are drawn when opened. Each model is measured with
the Graph tab on screen and again with the Profile tab (four figures, the costliest tab); then
the time to open each other tab after the last refresh. Browser paint is not included: the
views are sent to the front end when the Python side returns.

    .venv/bin/python -m benchmarks.lab_refresh
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

import ortlab
from benchmarks._common import record
from ortlab.views.lab.lab import Lab

LEVELS = ["disabled", "all", "basic", "all", "extended", "all", "layout", "all"]


def _measure(make: Any, tab: str) -> tuple[Any, float, dict[str, float]]:
    """A Lab on ``tab``, eight toggles (each timed from setting the control to its return,
    so whatever the toggle triggers around the refresh counts); then the time to open every
    other tab."""
    t0 = time.perf_counter()
    lab = Lab(make(), runs=20, synchronous=True, tab=tab)
    ctor_s = time.perf_counter() - t0
    walls = []  # each toggle as the user waits for it: from the click to the views updated
    for level in LEVELS:
        t0 = time.perf_counter()
        lab.level.value = level
        walls.append(time.perf_counter() - t0)
    opened = {}
    for name in ("Graph", "Placement", "Profile", "Benchmark", "History"):
        if name == tab:
            continue
        t0 = time.perf_counter()
        lab.tabs.selected_index = list(lab.panes).index(name)
        opened[name] = time.perf_counter() - t0
    t = lab.history.to_pandas()
    lab.close()
    t["toggle_s"] = [float("nan"), *walls]
    return t, ctor_s, opened


CASES = {
    "ResNet-50": ("example", "resnet50"),
    "YOLOv8n (Ultralytics export)": ("corpus", "yolov8n_nudenet"),
    "PicoDet (1,493 nodes)": ("corpus", "picodet_layout"),
}


def _one(case: str, tab: str, out: str) -> None:
    """One model on one tab, in this (fresh) process; the results as JSON in ``out``."""
    from tests import corpus

    kind, name = CASES[case]
    make = (
        (lambda: ortlab.examples.load(name)) if kind == "example" else (lambda: corpus.load(name))
    )
    t, ctor_s, opened = _measure(make, tab)
    runs = t.drop(columns=["config"], errors="ignore").to_dict(orient="records")
    Path(out).write_text(
        json.dumps({"constructor_s": ctor_s, "open_tab_s": opened, "runs": runs}, default=str)
    )


def main() -> None:
    import subprocess
    import sys
    import tempfile

    lines, data = [], {}
    for case in CASES:
        for tab in ("Graph", "Profile"):
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "r.json"
                subprocess.run(
                    [sys.executable, "-m", "benchmarks.lab_refresh", "--one", case, tab, str(out)],
                    check=True,
                )
                got = json.loads(out.read_text())
            data[f"{case} | {tab}"] = got
            lines += _table(case, tab, got)
    record("lab_refresh", {"rows": data}, "\n".join(lines))


def _table(case: str, tab: str, got: dict[str, Any]) -> list[str]:
    runs, opened = got["runs"], got["open_tab_s"]
    lines = [
        f"### {case}, {tab} tab on screen",
        "",
        "| run | setting | toggle s | ORT s (builds + runs) | ortlab overhead s |",
        "|---|---|---|---|---|",
    ]
    over = []
    for r in runs:
        ort = r["seconds"] - r["overhead_s"]
        if r["run"] == 1:  # the constructor's own refresh: timed inside the Lab
            wall, first = r["seconds"], f" (first: the Lab built in {got['constructor_s']:.2f} s)"
        else:
            wall, first = r["toggle_s"], ""
        over.append(wall - ort)
        lines.append(
            f"| {r['run']}{first} | {r['label']} | {wall:.2f} | {ort:.2f} | {wall - ort:.3f} |"
        )
    o = np.array(over)
    tabs = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in opened.items())
    ort_first = runs[0]["seconds"] - runs[0]["overhead_s"]
    lines += [
        "",
        f"ortlab overhead: first refresh {o[0]:.3f} s; per toggle median "
        f"{np.median(o[1:]):.3f} s, max {o[1:].max():.3f} s over {len(o) - 1} "
        f"toggles (goal ≤ 0.3 s for all). Opening a tab after the last refresh: {tabs}.",
        "",
        f"All of `Lab(...)` (construction, then the first refresh): "
        f"{got['constructor_s']:.2f} s, of which ORT {ort_first:.2f} s, so ortlab "
        f"{got['constructor_s'] - ort_first:.2f} s: building the widgets, loading plotly's "
        "figure code, a full garbage collection and the first refresh's overhead "
        "(the worker's start-up runs beside them).",
        "",
    ]
    return lines


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 5 and sys.argv[1] == "--one":
        _one(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main()
