"""Profile parsing throughput on a large real trace (goal: >= 1 M node events/s).

Makes a real ORT 1.31 trace of the bundled ResNet-50 with >= 100 k node events (level
'disabled' keeps all 176 nodes, so ~600 profiled runs), kept in ortlab's cache between runs of
this script. Then, interleaved in one process, it times

- ortlab: ``parse_profile_file`` + ``by_node()`` + ``by_op_type()``;
- ORT's own ``onnxruntime.transformers.profile_result_processor``: ``load_profile_json`` +
  ``parse_node_results`` + ``group_node_results`` (the same per-node and per-op tables);

and reports events/s and the paired ratio with a bootstrap interval.

    python benchmarks/profile_parse.py [--events 100000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort

import ortlab
from benchmarks._common import record
from ortlab.analysis.profiling import ProfileResult, parse_profile_file
from ortlab.core import cache
from ortlab.core.stats import paired_ratio


def make_trace(min_events: int) -> Path:
    target = cache.subdir("bench") / f"resnet50_disabled_{min_events}.json"
    if target.exists():
        return target
    m = ortlab.examples.load("resnet50")
    feeds = dict(m.example_inputs())
    with cache.temp_dir("trace-") as folder:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.enable_profiling = True
        so.profile_file_prefix = str(folder / "trace")
        sess = ort.InferenceSession(str(m.path), so, providers=["CPUExecutionProvider"])
        nodes = len(m.proto.graph.node)
        runs = -(-min_events // nodes)
        print(f"profiling {runs} runs of ResNet-50 ({nodes} nodes) for the trace …", flush=True)
        for _ in range(runs):
            sess.run(None, feeds)
        shutil.move(sess.end_profiling(), target)
    return target


def ortlab_side(path: Path) -> int:
    data = parse_profile_file(path)
    result = ProfileResult(model="resnet50", config={}, data=data)
    result.by_node()
    result.by_op_type()
    return len(data.ev_node)


def ort_side(path: Path) -> int:
    from onnxruntime.transformers import profile_result_processor as prp

    with contextlib.redirect_stdout(io.StringIO()):
        sess_time = prp.load_profile_json(str(path))
    prp.parse_node_results(sess_time)
    prp.group_node_results(sess_time)
    return sum(1 for e in sess_time if e.get("cat") == "Node")


def timed(fn: Callable[[Path], int], path: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = fn(path)
    return time.perf_counter() - t0, n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    path = make_trace(args.events)
    size_mb = path.stat().st_size / 1e6
    ours, theirs = [], []
    events = 0
    for i in range(args.rounds):
        for side in ("ortlab", "ort") if i % 2 == 0 else ("ort", "ortlab"):
            if side == "ortlab":
                dt, events = timed(ortlab_side, path)
                ours.append(dt)
            else:
                theirs.append(timed(ort_side, path)[0])
    verdict = paired_ratio(theirs, ours)
    rate = events / float(np.median(ours))
    data = {
        "trace_mb": size_mb,
        "node_events": events,
        "rounds": args.rounds,
        "ortlab_s": float(np.median(ours)),
        "ort_processor_s": float(np.median(theirs)),
        "ortlab_events_per_s": rate,
        "ratio_ortlab_over_ort": verdict.ratio,
        "ci95": [verdict.low, verdict.high],
        "verdict": verdict.text("onnxruntime.transformers.profile_result_processor", "ortlab"),
    }
    md = "\n".join(
        [
            f"Real ORT trace of ResNet-50: {events:,} node events, {size_mb:.0f} MB; "
            f"{args.rounds} interleaved rounds, medians.",
            "",
            "| parser | seconds | node events/s |",
            "|---|---|---|",
            f"| ortlab (parse + by_node + by_op_type) | {data['ortlab_s']:.3f} | {rate:,.0f} |",
            "| ORT profile_result_processor (load + node + group) | "
            f"{data['ort_processor_s']:.3f} | "
            f"{events / data['ort_processor_s']:,.0f} |",
            "",
            f"{data['verdict']}",
        ]
    )
    record("profile_parse", data, md)


if __name__ == "__main__":
    main()
