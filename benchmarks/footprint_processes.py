"""A footprint's measurements in forked children against fresh interpreters.

ortlab measures a session's resident memory in a process of its own per measurement. It
started a fresh interpreter for each one (``python -m ortlab.engine._footprint_child``); it now
starts one measuring process per repeat that forks a child per measurement. For the doctor's
memory stage on each model (the configured session and its three memory settings, 4 repeats,
2 runs each, the model's example inputs), interleaved in one process, this times both ways of
starting the processes and reports:

- the paired ratio of their wall times (forked / fresh) with its 95 % interval;
- what each way measured: the median peak and held bytes per setting, and the file pages
  (library code) each counted: a forked child maps its parent's code pages in again as it runs
  them, the fixed offset ortlab states beside a footprint's figures.

ortlab measures the forked way only; the fresh interpreter (``python -m
ortlab.engine._footprint_child request answer``, :func:`fresh_measure`) is the reference.

    .venv/bin/python -m benchmarks.footprint_processes [--rounds 6] [resnet50 bert_tiny]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import ortlab
from benchmarks._common import markdown_table, record, verdict_fields
from ortlab.analysis.memory import memory_settings
from ortlab.core import cache
from ortlab.core.config import SessionConfig
from ortlab.core.stats import paired_ratio
from ortlab.engine.children import ChildFailed, FootprintAsk, run_child
from ortlab.engine.replies import FootprintSample
from ortlab.engine.tasks_memory import measurer

REPEATS, RUNS = 4, 2


def fresh_measure(folder: Path, ask: FootprintAsk, k: int) -> FootprintSample:
    """One measurement in a fresh interpreter: the reference for the forked children."""
    request, answer = folder / f"fresh{k}.pkl", folder / f"fresh{k}.json"
    with request.open("wb") as f:
        pickle.dump(ask, f)
    argv = [sys.executable, "-m", "ortlab.engine._footprint_child", str(request), str(answer)]
    try:
        got = run_child(argv, answer, cwd=folder, timeout=600, what="the measurement")
    except ChildFailed as err:
        return FootprintSample(error=str(err))
    return FootprintSample(**got)


def one_way(
    folder: Path, asks: list[FootprintAsk], *, forked: bool
) -> tuple[float, list[list[FootprintSample]]]:
    """The memory stage's measurements one way: its seconds and its samples per setting."""
    out: list[list[FootprintSample]] = [[] for _ in asks]
    start = time.perf_counter()
    for _ in range(REPEATS):
        if forked:
            with measurer(folder) as measure:
                assert not measure.refused, measure.refused
                for k, ask in enumerate(asks):
                    out[k].append(measure(ask, k))
        else:
            for k, ask in enumerate(asks):
                out[k].append(fresh_measure(folder, ask, k))
    return time.perf_counter() - start, out


def bench(name: str, rounds: int) -> dict[str, Any]:
    m = ortlab.examples.load(name)
    cfg = SessionConfig()
    configs = {"as configured": cfg, **memory_settings(cfg)}
    with cache.temp_dir("bench-footprint-") as folder:
        feeds_file = folder / "feeds.pkl"
        with feeds_file.open("wb") as f:
            pickle.dump(dict(m.example_inputs()), f)
        asks: list[FootprintAsk] = [
            {
                "model_path": str(m.path),
                "name": m.name,
                "config": c,
                "feeds_file": str(feeds_file),
                "runs": RUNS,
            }
            for c in configs.values()
        ]
        seconds: dict[bool, list[float]] = {True: [], False: []}
        samples: dict[bool, list[list[FootprintSample]]] = {
            True: [[] for _ in asks],
            False: [[] for _ in asks],
        }
        for r in range(rounds):
            for forked in (r % 2 == 0, r % 2 == 1):  # alternate which way goes first
                s, got = one_way(folder, asks, forked=forked)
                seconds[forked].append(s)
                for k, g in enumerate(got):
                    samples[forked][k] += g
    v = paired_ratio(seconds[False], seconds[True])
    settings = []
    for k, label in enumerate(configs):
        row: dict[str, Any] = {"setting": label}
        for forked, way in ((True, "forked"), (False, "fresh")):
            errors = [g.error for g in samples[forked][k] if g.error]
            assert not errors, errors[:2]
            for what in ("peak_bytes", "held_bytes", "file_bytes"):
                values = [float(getattr(g, what)) for g in samples[forked][k]]
                row[f"{way}_{what}"] = float(np.median(values))
                row[f"{way}_{what}_range"] = [min(values), max(values)]
        settings.append(row)
    return {
        "model": name,
        "rounds": rounds,
        "fresh_s": float(np.median(seconds[False])),
        "forked_s": float(np.median(seconds[True])),
        **verdict_fields(v, "ratio", "fresh interpreters", "forked children"),
        "settings": settings,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet50", "bert_tiny"])
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    rows = [bench(name, args.rounds) for name in args.models]
    lines = [
        f"The doctor's memory stage (4 settings × {REPEATS} repeats, {RUNS} runs each) with "
        "each measurement in a fresh interpreter against a child forked by a measuring process "
        "started per repeat; interleaved rounds in one process, the order alternating.",
        "",
        *markdown_table(
            ["model", "rounds", "fresh s (median)", "forked s (median)", "forked / fresh [95 %]"],
            [
                (
                    r["model"],
                    r["rounds"],
                    f"{r['fresh_s']:.2f}",
                    f"{r['forked_s']:.2f}",
                    f"{r['ratio']:.2f}x [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]",
                )
                for r in rows
            ],
        ),
        "",
        "What each way measured (MB: the median over every round's repeats, and the range):",
        "",
        *markdown_table(
            [
                "model",
                "setting",
                "peak fresh",
                "peak forked",
                "held fresh",
                "held forked",
                "file pages fresh",
                "file pages forked",
            ],
            [
                (
                    r["model"],
                    s["setting"],
                    *(
                        f"{s[key] / 1e6:.2f} ({s[key + '_range'][0] / 1e6:.1f}–"
                        f"{s[key + '_range'][1] / 1e6:.1f})"
                        for key in (
                            "fresh_peak_bytes",
                            "forked_peak_bytes",
                            "fresh_held_bytes",
                            "forked_held_bytes",
                            "fresh_file_bytes",
                            "forked_file_bytes",
                        )
                    ),
                )
                for r in rows
                for s in r["settings"]
            ],
        ),
    ]
    lines += [
        "",
        "Where a model's figures fall in modes (resnet50's lie about 8 MB apart, either way), "
        "the median of a setting's samples can land in either: compare the ranges. The file "
        "pages are the part of held that is library code the process faulted in as it built "
        "and ran the session: a forked child re-faults its parent's code pages, a fresh "
        "interpreter had most of them resident before it started; the difference is the fixed "
        "offset a footprint states beside its figures.",
    ]
    record("footprint_processes", {"rows": rows}, "\n".join(lines))


if __name__ == "__main__":
    main()
