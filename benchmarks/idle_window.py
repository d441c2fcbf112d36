"""The idle window that ends once the pool has parked, against the whole window.

After a session's runs, ortlab measures the cores its process keeps busy while idle (ORT's
pool spinning for work that does not come) over :data:`~ortlab.core.machine.IDLE_WINDOW_S`.
It used to sleep the whole window; ``tasks_timing.idle_cores`` now ends it once the process
has used under ``SETTLED_CORES`` of a core over ``SETTLED_S`` and reports the whole window's
figure. Every benchmark call and every item of the doctor's CPU stage waits for it.

For a plain onnxruntime session in this process (a spinning pool of 1 and 2 threads, and one
that does not spin), in interleaved rounds (each round: identical runs, then one way; the
order alternating), this reports each way's figure (median and range: they must agree) and
the paired ratio of the time each way waited, with its 95 % interval.

    .venv/bin/python -m benchmarks.idle_window [--rounds 20] [--model conv_bn_relu]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

import ortlab
from benchmarks._common import markdown_table, record, verdict_fields
from ortlab.core.machine import IDLE_WINDOW_S
from ortlab.core.stats import paired_ratio
from ortlab.engine.tasks_timing import SETTLED_CORES, SETTLED_S, idle_cores

RUNS = 20
"""Identical runs before each measurement."""
SETTINGS = {
    "spinning, 2 threads": ("1", 2),
    "spinning, 1 thread": ("1", 1),
    "not spinning, 2 threads": ("0", 2),
}


def whole_window() -> float:
    """The window as it was measured before: sleep all of it, CPU time over wall time."""
    c0, t0 = time.process_time_ns(), time.perf_counter_ns()
    time.sleep(IDLE_WINDOW_S)
    return (time.process_time_ns() - c0) / (time.perf_counter_ns() - t0)


def bench(label: str, model: ortlab.Model, rounds: int) -> dict[str, Any]:
    import onnxruntime as ort

    spin, threads = SETTINGS[label]
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.intra_op.allow_spinning", spin)
    sess = ort.InferenceSession(str(model.path), so, providers=["CPUExecutionProvider"])
    feeds = dict(model.example_inputs(seed=1))
    ways = {"whole": whole_window, "early": idle_cores}
    cores: dict[str, list[float]] = {w: [] for w in ways}
    waited: dict[str, list[float]] = {w: [] for w in ways}
    for r in range(rounds):
        order = list(ways) if r % 2 == 0 else list(ways)[::-1]
        for way in order:
            for _ in range(RUNS):
                sess.run(None, feeds)
            t0 = time.perf_counter()
            cores[way].append(ways[way]())
            waited[way].append(time.perf_counter() - t0)
    v = paired_ratio(waited["whole"], waited["early"])
    return {
        "setting": label,
        "rounds": rounds,
        **{f"{w}_cores": float(np.median(cores[w])) for w in ways},
        **{f"{w}_cores_range": [min(cores[w]), max(cores[w])] for w in ways},
        **{f"{w}_ms": float(np.median(waited[w])) * 1e3 for w in ways},
        **verdict_fields(v, "ratio", "the whole window", "the early end"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--model", default="conv_bn_relu")
    args = parser.parse_args()
    model = ortlab.examples.load(args.model)
    rows = [bench(label, model, args.rounds) for label in SETTINGS]
    lines = [
        f"{model.name}: {RUNS} identical runs of a plain onnxruntime session, then the idle "
        f"window ({IDLE_WINDOW_S:g} s) measured one way; {args.rounds} interleaved rounds, "
        f"the order alternating. The early end: under {SETTLED_CORES:g} of a core over "
        f"{SETTLED_S * 1e3:g} ms.",
        "",
        *markdown_table(
            [
                "setting",
                "cores, whole (range)",
                "cores, early (range)",
                "waited, whole ms",
                "waited, early ms",
                "early / whole [95 %]",
            ],
            [
                (
                    r["setting"],
                    f"{r['whole_cores']:.3f} ({r['whole_cores_range'][0]:.3f}–"
                    f"{r['whole_cores_range'][1]:.3f})",
                    f"{r['early_cores']:.3f} ({r['early_cores_range'][0]:.3f}–"
                    f"{r['early_cores_range'][1]:.3f})",
                    f"{r['whole_ms']:.0f}",
                    f"{r['early_ms']:.0f}",
                    f"{r['ratio']:.2f}x [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]",
                )
                for r in rows
            ],
        ),
        "",
        "The figure is the whole window's either way (CPU over the window): the early end "
        "stops waiting once the pool has parked and counts the rest as sleep.",
    ]
    record("idle_window", {"rows": rows}, "\n".join(lines))


if __name__ == "__main__":
    main()
