"""The seed's quantization table (FP32 / FP16 / dynamic INT8 / static QDQ), reproduced on the
bundled ResNet-50 and the transformer-shaped bert_tiny.

Per variant: latency p50 (interleaved with fp32 in one worker), paired time ratio with a 95 %
bootstrap CI, speed-up, file size, output error (cosine, SQNR) and the quantized kernels that
really ran. Calibration and evaluation inputs are synthetic (random): the error columns say
how far the arithmetic drifted, not task accuracy — the seed's F1 column cannot be reproduced
without the dataset.

    python benchmarks/quantization_table.py [--rounds 10] [--runs 10]
"""

from __future__ import annotations

import argparse

import ortlab
from benchmarks._common import record

SEED = [  # the seed's BERT table (unnamed GPU hardware): latency, speed-up, memory, F1
    ("FP32", "6.1 ms", "1.0x", "418 MB", "88.5"),
    ("FP16 (CUDA EP)", "3.2 ms", "1.9x", "209 MB", "88.5"),
    ("Dynamic INT8", "2.8 ms", "2.2x", "105 MB", "87.8"),
    ("Static INT8 (QDQ)", "2.1 ms", "2.9x", "105 MB", "88.1"),
]
MODELS = {"resnet50": None, "bert_tiny": {"batch": 1, "sequence": 128}}


def variants(m: ortlab.Model) -> list[ortlab.Model]:
    return [
        ortlab.to_fp16(m),
        ortlab.quantize(m, mode="dynamic"),
        ortlab.quantize(m, mode="static", format="qdq", per_channel=True, calibration_size=8),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    lines = [
        f"Interleaved in one worker ({args.rounds} rounds × {args.runs} runs), CPU EP, level all. "
        "Error on 8 synthetic input samples (random weights, random inputs).",
        "",
        "| model | variant | p50 ms | time ratio [95 % CI] | speed-up | size MB | cosine | "
        "SQNR dB | quantized kernels that ran |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    data = []
    for name, dims in MODELS.items():
        m = ortlab.examples.load(name)
        feeds = m.example_inputs(dims=dims)
        c = ortlab.compare(
            m,
            variants(m),
            feeds=feeds,
            rounds=args.rounds,
            runs=args.runs,
            eval_data=[dict(m.example_inputs(dims=dims, seed=300 + i)) for i in range(8)],
        )
        print(c.to_text(), flush=True)
        data.append({"model": name, "result": c.to_dict()})
        for r in c.to_pandas().itertuples():
            kernels = r.quantized_kernels or "—"
            speed = "—" if r.variant == "fp32" else f"{1 / r.ratio:.2f}x"
            lines.append(
                f"| {name} | {r.variant} | {r.p50_ms:.2f} | {r.ratio:.2f} [{r.ratio_low:.2f}, "
                f"{r.ratio_high:.2f}] | {speed} | {r.file_mb:.1f} | {r.cosine:.4f} | "
                f"{r.sqnr_db:.1f} | {kernels[:80]} |"
            )
        lines += [
            f"| {name} | why | {s.variant}: {s.signal} | | | | | | {s.evidence[:120]} |"
            for s in c.signals
        ]
    lines += [
        "",
        "The seed's table (BERT on an unnamed GPU; F1 on SQuAD):",
        "",
        "| quantization | latency | speed-up | memory | F1 |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {' | '.join(row)} |" for row in SEED]
    record(
        "quantization_table",
        {"rounds": args.rounds, "runs": args.runs, "models": data},
        "\n".join(lines),
    )


if __name__ == "__main__":
    main()
