"""How much does ortlab's measurement add over a bare ``sess.run`` loop? (goal: <= 2 %)

On the bundled ResNet-50, in one process (ortlab in-process mode, so both loops share the
process), rounds alternate ortlab.benchmark(runs=R) and a bare loop of R timed ``sess.run``
calls (A B, B A, …) so drift hits both. Per round we take each side's median latency and
their ratio; the verdict is the median ratio with a bootstrap 95 % interval.

A second figure compares the default worker-process mode (timing inside the worker) against a
bare loop in this process, interleaved the same way.

    python benchmarks/overhead.py [--rounds 20] [--runs 20]
"""

from __future__ import annotations

import argparse

import numpy as np
import onnxruntime as ort

import ortlab
from benchmarks._common import record, verdict_fields
from ortlab.core.stats import paired_ratio
from tests.reference import bare_median_ms


def measure(mode: str, rounds: int, runs: int) -> dict:
    ortlab.set_isolation(mode)
    m = ortlab.examples.load("resnet50")
    feeds = dict(m.example_inputs())
    cfg = ortlab.SessionConfig(level="all")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(str(m.path), so, providers=["CPUExecutionProvider"])
    for _ in range(5):
        sess.run(None, feeds)
    ortlab.benchmark(m, cfg, feeds, runs=5, warmup=3, progress=False)  # build + warm its session
    ours, bare = [], []
    for i in range(rounds):
        order = ("ortlab", "bare") if i % 2 == 0 else ("bare", "ortlab")
        for side in order:
            if side == "ortlab":
                b = ortlab.benchmark(m, cfg, feeds, runs=runs, warmup=1, progress=False)
                ours.append(b.stats.p50_ms)
            else:
                sess.run(None, feeds)  # same one warm-up run as ortlab's
                bare.append(bare_median_ms(sess, feeds, runs))
    verdict = paired_ratio(bare, ours, noise=0.02)
    return {
        "mode": mode,
        "rounds": rounds,
        "runs_per_round": runs,
        "ortlab_p50_ms": float(np.median(ours)),
        "bare_p50_ms": float(np.median(bare)),
        **verdict_fields(verdict, "ratio", "bare sess.run loop", "ortlab.benchmark"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    results = [measure(mode, args.rounds, args.runs) for mode in ("inprocess", "process")]
    lines = [
        "ortlab.benchmark median latency vs a bare `sess.run` loop, ResNet-50 (level all, "
        f"CPU EP), {args.rounds} interleaved rounds of {args.runs} runs.",
        "",
        "| mode | ortlab p50 ms | bare p50 ms | ratio ortlab/bare | 95 % CI | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['mode']} | {r['ortlab_p50_ms']:.3f} | {r['bare_p50_ms']:.3f} | "
            f"{r['ratio']:.4f} | [{r['ci95'][0]:.4f}, {r['ci95'][1]:.4f}] | {r['verdict']} |"
        )
    record("overhead", {"results": results}, "\n".join(lines))


if __name__ == "__main__":
    main()
