"""The seed's "impact of graph optimization levels" table, reproduced on the bundled models.

For each model: latency per level (disabled, basic, extended, layout, all), measured interleaved
in one worker (A B C D E, E D C B A, …) with ortlab.optimization_diff, the median ratio to
`disabled` with a bootstrap 95 % interval, and node counts. Recorded as JSON and markdown with
the machine's details. The seed's own figures (unnamed hardware) are shown beside ours.

    python benchmarks/optimization_levels.py [--rounds 10] [--runs 10] [--models resnet50,…]
"""

from __future__ import annotations

import argparse

import ortlab
from benchmarks._common import record

# The seed's table: No Optimization / Basic / Extended / All (ms), as printed there.
SEED = {
    "ResNet-50 (batch=1)": (2.8, 2.6, 2.1, 1.8),
    "BERT-Base (seq=128)": (12.4, 11.8, 8.2, 6.1),
    "EfficientNet-B0": (3.4, 3.2, 2.8, 2.5),
}
DEFAULT = "resnet50,densenet121,inception_v2,shufflenet,squeezenet,bert_tiny"
DIMS = {"bert_tiny": {"batch": 1, "sequence": 128}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--models", default=DEFAULT)
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0 = ORT)")
    args = parser.parse_args()
    rows = []
    for name in args.models.split(","):
        m = ortlab.examples.load(name)
        opt = ortlab.optimization_diff(
            m,
            config={"intra_op_threads": args.threads},
            rounds=args.rounds,
            runs=args.runs,
            dims=DIMS.get(name),
            progress=False,
        )
        nodes = {lv.level: lv.nodes for lv in opt.levels}
        for r in opt.latency_rows:
            rows.append(
                {
                    "model": name,
                    "level": r.level,
                    "nodes": nodes[r.level],
                    "p50_ms": r.p50_ms,
                    "ratio": r.paired.ratio,
                    "ci95": [r.paired.low, r.paired.high],
                    "verdict": r.paired.verdict,
                }
            )
        print(opt.to_text(), flush=True)
    levels = ["disabled", "basic", "extended", "layout", "all"]
    table = [
        "Latency per level, median of per-round medians (ms); in brackets the time ratio to "
        f"`disabled` (paired over {args.rounds} interleaved rounds of {args.runs} runs, 95 % "
        "bootstrap CI). Speed-up = 1 / ratio at the best level. CPU EP, batch 1.",
        "",
        "| model | nodes (disabled → all) | " + " | ".join(levels) + " | best speed-up |",
        "|---|---|" + "---|" * len(levels) + "---|",
    ]
    for name in args.models.split(","):
        mine = {row["level"]: row for row in rows if row["model"] == name}
        cells = []
        for lv in levels:
            cell = mine[lv]
            ci = (
                ""
                if lv == "disabled"
                else f" ({cell['ratio']:.2f} [{cell['ci95'][0]:.2f}, {cell['ci95'][1]:.2f}])"
            )
            cells.append(f"{cell['p50_ms']:.2f}{ci}")
        best = min(levels[1:], key=lambda lv: mine[lv]["ratio"])
        verdict = mine[best]["verdict"]
        speed = (
            f"{1 / mine[best]['ratio']:.2f}x at {best}"
            if "faster" in verdict
            else "none measurable"
        )
        table.append(
            f"| {name} | {mine['disabled']['nodes']} → {mine['all']['nodes']} | "
            + " | ".join(cells)
            + f" | {speed} |"
        )
    table += [
        "",
        "The seed's claims (unnamed hardware; No Optimization / Basic / Extended / All, ms):",
        "",
        "| model | none | basic | extended | all | speed-up |",
        "|---|---|---|---|---|---|",
    ]
    for model, (a, b, c, d) in SEED.items():
        table.append(f"| {model} | {a} | {b} | {c} | {d} | {a / d:.2f}x |")
    record(
        "optimization_levels",
        {"rows": rows, "rounds": args.rounds, "runs": args.runs},
        "\n".join(table),
    )


if __name__ == "__main__":
    main()
