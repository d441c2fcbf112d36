"""Weight-only int4 on the bundled decoder (size, latency at a prefill and a decode step,
accuracy against fp32), and one graph transformer off at a time on a CNN and a transformer.

All timings interleaved in one worker (ortlab.compare / ortlab.ablate_optimizers), with their
intervals; inputs synthetic (seeded), as the tables say.

    .venv/bin/python -m benchmarks.int4_and_ablation
"""

from __future__ import annotations

import numpy as np

import ortlab
from benchmarks._common import record


def _cache(past: int) -> dict[str, np.ndarray]:
    return {
        f"past_key_values.{i}.{kv}": np.zeros((1, 4, past, 64), np.float32)
        for i in range(2)
        for kv in ("key", "value")
    }


def main() -> None:
    m = ortlab.examples.load("decoder_tiny")
    variants = [
        ortlab.quantize(m, mode="int4", block_size=32),
        ortlab.quantize(m, mode="int4", block_size=32, accuracy_level=4),
        ortlab.quantize(m, mode="int4", block_size=128),
    ]
    rng = np.random.default_rng(0)
    steps = {
        "prefill (128 tokens)": {"input_ids": rng.integers(0, 2048, (1, 128)), **_cache(0)},
        "decode (1 token, 256 cached)": {"input_ids": rng.integers(0, 2048, (1, 1)), **_cache(256)},
    }
    lines = [
        "## Weight-only int4 on decoder_tiny (2 layers, hidden 256, vocab 2048; random weights)",
        "",
    ]
    data: dict[str, object] = {}
    for label, feeds in steps.items():
        cmp = ortlab.compare(m, variants, feeds=feeds, rounds=10, runs=10, progress=False)
        t = cmp.to_pandas()
        data[label] = t[
            [
                "variant",
                "file_mb",
                "p50_ms",
                "ratio",
                "ratio_low",
                "ratio_high",
                "cosine",
                "verdict",
            ]
        ].to_dict(orient="records")
        lines += [
            f"### {label}",
            "",
            "| variant | MB | p50 ms | time ratio [interval] | cosine vs fp32 | verdict |",
            "|---|---|---|---|---|---|",
        ]
        for r in t.itertuples():
            ci = f"[{r.ratio_low:.3f}, {r.ratio_high:.3f}]"
            lines.append(
                f"| {r.variant} | {r.file_mb:.1f} | {r.p50_ms:.2f} | {r.ratio:.3f} "
                f"{ci} | {r.cosine:.5f} | {r.verdict} |"
            )
        lines.append("")
    lines += ["## One transformer off at a time (level all, CPU)", ""]
    for name in ("resnet50", "bert_tiny"):
        a = ortlab.ablate_optimizers(ortlab.examples.load(name), rounds=10, runs=10, progress=False)
        data[f"ablation {name}"] = a.to_pandas().to_dict(orient="records")
        lines += [f"### {name}", "", "```", a.to_text(), "```", ""]
    record("int4_and_ablation", data, "\n".join(lines))


if __name__ == "__main__":
    main()
