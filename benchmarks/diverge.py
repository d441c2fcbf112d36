"""Where the numbers change, how fast (issue 49 item 7).

1. Per-tensor comparison: ortlab's fold (``engine.errorsums.ErrorSums.add`` then ``metrics``:
   cosine, SQNR, max and mean abs in float64) against the plain numpy a person would write
   (float64 copies, dot products, abs), interleaved in one process on float32 tensors of 4,
   64 and 256 MB a side: GB/s of tensor data (both sides' bytes) and the paired time ratio.
2. A diagnosis end to end (``ortlab.diverge``, worker start-up excluded: one warm call
   first): the 1,000-node chain with one weight planted, the 1,000-node QDQ chain with one
   scale planted (the tests' models), the same QDQ chain at level all against disabled (a
   divergence exposure hides: bisected) and ResNet-50 level all against disabled — seconds
   (median of 3), session runs, and the tensor bytes compared per second of the whole call.

    python -m benchmarks.diverge [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

import ortlab
from benchmarks._common import record, verdict_fields
from ortlab.core import cache
from ortlab.core.stats import paired_ratio
from ortlab.engine.errorsums import ErrorSums


def ortlab_fold(x: np.ndarray, y: np.ndarray) -> float:
    s = ErrorSums()
    s.add(x, y)
    return s.metrics().cosine


def plain_numpy(x: np.ndarray, y: np.ndarray) -> float:
    r, t = x.astype(np.float64).ravel(), y.astype(np.float64).ravel()
    d = r - t
    _ = float(np.abs(d).max()), float(np.abs(d).mean()), float(d @ d)
    return float(r @ t) / float(np.sqrt((r @ r) * (t @ t)))


def fold_rates(rounds: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    rows = []
    for mb in (4, 64, 256):
        n = mb * (1 << 20) // 4
        x = rng.standard_normal(n, dtype=np.float32)
        y = x + rng.standard_normal(n, dtype=np.float32) * 1e-3
        sides = {"ortlab": ortlab_fold, "numpy": plain_numpy}
        times: dict[str, list[float]] = {k: [] for k in sides}
        for fn in sides.values():
            fn(x, y)  # untimed: first touch
        for i in range(rounds):
            for side in list(sides)[i % 2 :] + list(sides)[: i % 2]:
                t0 = time.perf_counter()
                sides[side](x, y)
                times[side].append(time.perf_counter() - t0)
        verdict = paired_ratio(times["numpy"], times["ortlab"])
        gb = 2 * x.nbytes / 1e9
        rows.append(
            {
                "mb_a_side": mb,
                "ortlab_gb_per_s": gb / statistics.median(times["ortlab"]),
                "numpy_gb_per_s": gb / statistics.median(times["numpy"]),
                **verdict_fields(verdict, "ratio", "plain numpy", "ortlab's fold"),
            }
        )
        del x, y
    return rows


def _cases(folder: Path) -> list[tuple[str, Any, Any]]:
    from tests.test_diverge import chain, qdq_chain

    a, b = chain(folder / "a.onnx"), chain(folder / "b.onnx", plant=601)
    qa, qb = qdq_chain(folder / "qa.onnx"), qdq_chain(folder / "qb.onnx", plant=150)
    resnet = ortlab.examples.load("resnet50")
    return [
        ("1,000-node chain, one weight planted", a, b),
        ("1,000-node QDQ chain, one scale planted", qa, qb),
        ("QDQ chain, level all vs disabled (bisected)", qa, {"level": "disabled"}),
        ("ResNet-50, level all vs disabled", resnet, {"level": "disabled"}),
    ]


def diagnoses(repeats: int) -> list[dict[str, Any]]:
    rows = []
    with cache.temp_dir("bench-diverge-") as folder:
        cases = _cases(folder)
        ortlab.diverge(cases[0][1], cases[0][2], progress=False)  # the worker, warm
        for label, model, against in cases:
            took, r = [], None
            for _ in range(repeats):
                t0 = time.perf_counter()
                r = ortlab.diverge(model, against, progress=False)
                took.append(time.perf_counter() - t0)
            assert r is not None
            m = ortlab.load(model)
            feeds = m.example_inputs(seed=0)
            bytes_compared = _tensor_bytes(m, r, feeds)
            rows.append(
                {
                    "case": label,
                    "nodes": m.summary.node_count_total,
                    "seconds": statistics.median(took),
                    "session_runs": r.session_runs,
                    "first": r.first.node if r.first else None,
                    "found_by": r.first.found_by if r.first else None,
                    "tensor_mb_compared": bytes_compared / 1e6,
                    "gb_per_s_whole_call": bytes_compared / 1e9 / statistics.median(took),
                }
            )
    return rows


def _tensor_bytes(m: Any, r: Any, feeds: dict[str, Any]) -> int:
    """Both sides' bytes of every tensor compared, from one plain run with them exposed."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    proto = onnx.load(m.path)
    names = [t.tensor for t in r.tensors]
    proto.graph.output.extend(helper.make_empty_tensor_value_info(t) for t in names)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return 2 * sum(int(np.asarray(v).nbytes) for v in sess.run(names, dict(feeds)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    folds = fold_rates(args.rounds)
    cases = diagnoses(args.repeats)
    lines = [
        f"Per-tensor comparison, {args.rounds} interleaved rounds, medians; GB/s of tensor "
        "data (both sides' bytes); ratio: ortlab's time over plain numpy's.",
        "",
        "| MB a side | ortlab GB/s | numpy GB/s | ratio | 95 % CI | verdict |",
        "|---|---|---|---|---|---|",
        *(
            f"| {f['mb_a_side']} | {f['ortlab_gb_per_s']:.2f} | {f['numpy_gb_per_s']:.2f} | "
            f"{f['ratio']:.3f} | [{f['ci95'][0]:.3f}, {f['ci95'][1]:.3f}] | {f['verdict']} |"
            for f in folds
        ),
        "",
        f"ortlab.diverge end to end, median of {args.repeats} calls (a warm worker): the "
        "whole call (sessions built, runs, suspects alone, the bisection) and the tensor "
        "bytes it compared over that time.",
        "",
        "| case | nodes | s | session runs | first | found by | MB compared | GB/s (whole) |",
        "|---|---|---|---|---|---|---|---|",
        *(
            f"| {c['case']} | {c['nodes']} | {c['seconds']:.1f} | {c['session_runs']} | "
            f"{c['first'] or '—'} | {c['found_by'] or '—'} | {c['tensor_mb_compared']:.0f} | "
            f"{c['gb_per_s_whole_call']:.2f} |"
            for c in cases
        ),
    ]
    record("diverge", {"fold": folds, "diagnoses": cases}, "\n".join(lines))


if __name__ == "__main__":
    main()
