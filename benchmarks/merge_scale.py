"""``ortlab.merge`` at fleet scale (issue 63 item 6): 100,000 synthetic records — 1,000 items
on 100 machines, each a benchmark record as ``ortlab run`` writes it (a real record's
provenance and envelope, 30 latencies drawn log-normal per record, one machine in ten 20 %
slower on one item in fifty) — merged from disk, timed three times in one process. Writing the
records is not timed. Reports the wall time of the merge (reading and decoding the files,
pooling, 99,000 verdicts), the records per second, and that the planted slowdowns were found.

    .venv/bin/python -m benchmarks.merge_scale [--items 1000] [--machines 100]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

import ortlab
from benchmarks._common import markdown_table, record


def write_records(folder: Path, items: int, machines: int, seed: int = 0) -> int:
    """The synthetic records (a real benchmark record's envelope for each): how many."""
    m = ortlab.examples.load("mlp")
    template = json.loads(ortlab.benchmark(m, runs=30, progress=False).to_json())
    rng = np.random.default_rng(seed)
    n = 0
    for machine in range(machines):
        host = f"node-{machine:03d}"
        where = folder / host
        where.mkdir(parents=True)
        slow = machine % 10 == 9
        for item in range(items):
            doc = dict(template)
            doc["record"] = {**template["record"], "system": {**template["record"]["system"]}}
            doc["record"]["system"]["hostname"] = host
            factor = 1.2 if slow and item % 50 == 0 else 1.0
            base = 1e5 * (1 + item % 7)
            lat = base * factor * rng.lognormal(0.0, 0.03, 30)
            doc["data"] = {**template["data"], "latencies_ns": [int(x) for x in lat]}
            doc["item"] = {"key": f"model-{item:04d} · benchmark · all", "verb": "benchmark"}
            (where / f"item-{item:04d}.json").write_text(json.dumps(doc))
            n += 1
    return n


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--items", type=int, default=1000)
    p.add_argument("--machines", type=int, default=100)
    a = p.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ortlab-merge-scale-"))
    try:
        n = write_records(folder, a.items, a.machines)
        size = sum(f.stat().st_size for f in folder.rglob("*.json"))
        times = []
        for _ in range(3):
            started = time.perf_counter()
            r = ortlab.merge([folder], baseline="node-000")
            times.append(time.perf_counter() - started)
        planted = {
            (f"model-{i:04d} · benchmark · all", f"node-{k:03d}")
            for i in range(0, a.items, 50)
            for k in range(9, a.machines, 10)
        }
        found = {
            (row.item, col)
            for row in r.rows
            for col, c in row.cells.items()
            if c.verdict.startswith("worse")
        }
        false = found - planted
    finally:
        shutil.rmtree(folder)
    rows = [
        [
            f"{n:,}",
            f"{size / 1e6:,.0f} MB",
            f"{min(times):.2f} s",
            f"{max(times):.2f} s",
            f"{n / min(times):,.0f}",
            f"{len(planted & found)} of {len(planted)}",
            f"{len(false)}",
        ]
    ]
    head = [
        "records",
        "on disk",
        "merge (best of 3)",
        "worst",
        "records/s",
        "planted found",
        "other cells 'worse'",
    ]
    text = "\n".join(
        [
            f"{a.items:,} items x {a.machines} machines, 30 latencies a record, one machine in "
            "ten 20 % slower on one item in fifty; merged from disk (page cache warm after "
            "writing), three times in one process.",
            "",
            *markdown_table(head, rows),
        ]
    )
    record(
        "merge_scale",
        {
            "records": n,
            "bytes": size,
            "seconds": times,
            "planted": len(planted),
            "found": len(planted & found),
            "false": len(false),
        },
        text,
    )


if __name__ == "__main__":
    main()
