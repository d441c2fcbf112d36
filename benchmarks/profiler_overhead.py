"""What ORT's profiler costs per node: the figure ortlab quotes wherever a time was measured with
the profiler on (``core.runtime.PROFILER_US_PER_NODE``).

Per model, two sessions of plain onnxruntime built alike (level all, the default threads), one
with ``enable_profiling``, timed interleaved in rounds (A B, B A, …); per round, the median run
of each; the overhead per node is (profiled - plain) / node events per run, the median over
rounds with the order-statistic interval of that median.

    python -m benchmarks.profiler_overhead [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

import ortlab
from benchmarks._common import record
from ortlab.core.stats import median_with_interval

MODELS = ("mlp", "residual_cnn", "bert_tiny", "resnet50")


def _session(path: str, profile_dir: str | None) -> ort.InferenceSession:
    so = ort.SessionOptions()
    if profile_dir is not None:
        so.enable_profiling = True
        so.profile_file_prefix = str(Path(profile_dir) / "p")
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def _median_run_s(sess: ort.InferenceSession, feeds: dict, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def measure(name: str, rounds: int) -> dict[str, float]:
    m = ortlab.examples.load(name)
    feeds = dict(m.example_inputs(seed=0))
    with tempfile.TemporaryDirectory() as folder:
        plain, profiled = _session(str(m.path), None), _session(str(m.path), folder)
        one = _median_run_s(plain, feeds, 3)
        runs = max(5, min(200, int(0.2 / max(one, 1e-5))))  # about 0.2 s a side a round
        for s in (plain, profiled):
            _median_run_s(s, feeds, runs)  # warm-up
        diffs = []
        for r in range(rounds):
            order = (plain, profiled) if r % 2 == 0 else (profiled, plain)
            got = {id(s): _median_run_s(s, feeds, runs) for s in order}
            diffs.append(got[id(profiled)] - got[id(plain)])
        trace = json.loads(Path(profiled.end_profiling()).read_text())
    run_events = sum(1 for e in trace if e.get("name") == "model_run")
    node_events = sum(1 for e in trace if e.get("cat") == "Node")
    per_run = node_events / max(run_events, 1)
    per_node = np.asarray(diffs) * 1e6 / per_run
    mid, low, high, coverage = median_with_interval(per_node)
    return {
        "nodes_per_run": per_run,
        "plain_ms": one * 1e3,
        "us_per_node": mid,
        "low": low,
        "high": high,
        "coverage": coverage,
        "rounds": rounds,
        "runs_per_round": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    rows = {name: measure(name, args.rounds) for name in MODELS}
    lines = [
        "ORT's profiler on against off, two sessions of plain onnxruntime per model timed",
        "interleaved; overhead per executed node = (profiled - plain median run) / node events",
        "per run, the median over rounds with its order-statistic interval.",
        "",
        "| model | node events/run | run ms (off) | µs per node [interval] |",
        "|---|---|---|---|",
        *(
            f"| {k} | {v['nodes_per_run']:.0f} | {v['plain_ms']:.3f} | {v['us_per_node']:.2f} "
            f"[{v['low']:.2f}, {v['high']:.2f}] ({v['coverage']:.0%}) |"
            for k, v in rows.items()
        ),
    ]
    record("profiler_overhead", {"rows": rows}, "\n".join(lines))


if __name__ == "__main__":
    main()
