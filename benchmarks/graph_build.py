"""How long ``ortlab.graph(model)`` takes in Python: the graph view's data (nodes, blocks named
by FLOPs, tensor types, groups, the first picture), packed, and the widget made (no browser).

Cases: flat chains of 10,000 and 100,000 Adds all reading one broadcast tensor (no scopes, so
every node is cut into named blocks: the heaviest case for the block cutter), and a scoped
transformer of ~10,000 nodes. Per case, the median of a few calls:

- ``first``: a model never drawn before (each call on a new file: its content differs by a
  doc string), so shape inference and the FLOPs count run;
- ``same file``: a new ``ortlab.load`` of a file drawn before (what ``ortlab.graph(path)`` or
  a notebook cell re-run does): what depends on the model alone is reused, keyed by its
  fingerprint;
- ``same Model``: the same loaded model again (a Lab refresh).

Times are wall-clock; the machine's load (other processes' cores) is measured around them.

    python benchmarks/graph_build.py [--sizes 10000,100000] [--repeat 5] [--before RUN.json]

``--before``: the JSON of a run at an older commit (this script run there), shown alongside.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx

import ortlab
from benchmarks._common import record
from ortlab.core.machine import BUSY_CORES, cpu_sample, other_cores
from ortlab.engine.examples import bert_tiny
from tests import models


def timed(call: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def variant(proto: onnx.ModelProto, k: int) -> onnx.ModelProto:
    """The same graph as a new file (another doc string): nothing cached for it yet."""
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    copy.doc_string = f"graph_build variant {k} {time.time_ns()}"
    return copy


def measure(label: str, proto: onnx.ModelProto, repeat: int) -> dict[str, Any]:
    before = cpu_sample()
    first, same_file, same_model = [], [], []
    nodes = 0
    for k in range(repeat):
        fresh = variant(proto, k)
        m = ortlab.load(fresh)
        first.append(timed(lambda m=m: ortlab.graph(m)))
        again = ortlab.load(fresh)  # a new Model of the same file
        same_file.append(timed(lambda again=again: ortlab.graph(again)))
        same_model.append(timed(lambda again=again: ortlab.graph(again)))
        nodes = len(m.nodes)
    after = cpu_sample()
    row = {
        "case": label,
        "nodes": nodes,
        "first_s": statistics.median(first),
        "same_file_s": statistics.median(same_file),
        "same_model_s": statistics.median(same_model),
        "first_all_s": first,
        "repeat": repeat,
        "other_cores": other_cores(before, after),
        "cpus": after.cpus,
    }
    print(row, flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", default="", help="a run's JSON at an older commit")
    args = parser.parse_args()
    before = json.loads(Path(args.before).read_text()) if args.before else {}
    old = {r["case"]: r for r in before.get("rows", [])}
    ortlab.graph(models.broadcast_chain(200))  # imports, the widget's module texts, dagre
    cases: list[tuple[str, onnx.ModelProto, int]] = [
        (f"chain {n:,} + broadcast (flat)", models.broadcast_chain(n), args.repeat)
        if n <= 20_000
        else (f"chain {n:,} + broadcast (flat)", models.broadcast_chain(n), 3)
        for n in map(int, args.sizes.split(","))
    ]
    cases.append(
        ("transformer ~10,000 (scoped)", bert_tiny(layers=200, hidden=16, heads=2, vocab=50), 3)
    )
    rows = [measure(label, proto, repeat) for label, proto, repeat in cases]
    lines = [
        "`ortlab.graph(model)` in Python (graph data, packing, the widget; no browser), median "
        "of the calls. `first`: a model never drawn before (ONNX shape inference and the FLOPs "
        "count run); `same file`: a new `ortlab.load` of a file drawn before (what depends on "
        "the model alone is reused, keyed by its fingerprint); `same Model`: the same loaded "
        "model again. Goal (issue 38): ≤ 0.5 s at 10,000 nodes, ≤ 5 s at 100,000. Other "
        f"processes: the cores they used meanwhile (above {BUSY_CORES} the machine was busy: "
        "times are noisier and slower than on an idle one).",
        "",
        "| case | nodes | first s | same file s | same Model s | calls | other processes |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, table in (("", rows), (f" (before: {before.get('commit', '?')})", old.values())):
        lines += [
            f"| {r['case']}{label} | {r['nodes']:,} | {r['first_s']:.2f} | "
            f"{r['same_file_s']:.2f} | {r['same_model_s']:.2f} | {r['repeat']} | "
            f"{r['other_cores']:.2f} of {r['cpus']} cores |"
            for r in table
        ]
    record("graph_build", {"rows": rows, "commit": _commit(), "before": before}, "\n".join(lines))


def _commit() -> str:
    import subprocess

    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return out.stdout.strip()


if __name__ == "__main__":
    main()
