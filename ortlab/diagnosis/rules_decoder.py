"""Rules for an LLM decoder, from its generation stage (:mod:`ortlab.diagnosis.generation`):
where a generation's time goes by phase, and each candidate that made decode or the prefill
faster in interleaved generations."""

from __future__ import annotations

import math

from ortlab.analysis.limits.roofline import NEAR
from ortlab.core.units import fmt_bandwidth, fmt_flops, fmt_ms, fmt_num, fmt_rate, tokens_per_s
from ortlab.diagnosis.facts import Facts, Finding, load_caveat

__all__ = ["decoder_phases", "decoder_trials"]

TTFT_FLOOR_MS = 1.0
"""A prefill shorter than this is no finding on its own: a first step under a millisecond is
a visible share thread wake-ups and cache state (identical sessions measured here differ by
±65 µs steps from round to round), and not what a user waits for."""


def decoder_phases(f: Facts) -> list[Finding]:
    """Where a generation's time goes: the prefill against decode, the op types of decode, and
    how near the weight multiplications come to the machine's ceilings in each phase."""
    gen = f.generation
    if gen is None:
        return []
    g = gen.baseline
    ttft, per_token = gen.base_ttft_ms, gen.base_decode_ms
    decode = per_token * (gen.new_tokens - 1)
    t = g.by_phase()
    parts = []
    if len(t):
        dec = t[t["phase"] == "decode"].groupby("op_type")["share"].sum()
        top = dec.sort_values(ascending=False).head(3)
        parts.append(
            "in decode "
            + ", ".join(f"{op} {share:.0%}" for op, share in top.items())
            + " of node time (profiled)"
        )
    w = g.weights
    bound = ""
    for row in w.itertuples():
        if row.phase == "decode":
            where = (
                "DRAM's measured"
                if row.ceiling == "DRAM"
                else f"the measured bandwidth of their cache level ({row.ceiling})"
            )
            parts.append(
                f"decode's {row.nodes} {row.op_type} read their weights at "
                f"{fmt_bandwidth(row.achieved_bytes)}, {row.fraction:.0%} of {where} "
                f"{fmt_bandwidth(row.bandwidth)}"
            )
            if not math.isnan(row.fraction):
                bound = "memory" if row.fraction >= NEAR else "overhead"
        else:
            parts.append(
                f"the prefill's {row.nodes} {row.op_type} compute at "
                f"{fmt_flops(row.achieved_flops, '/s')}, {row.fraction:.0%} of the {row.dtype} "
                f"GEMM peak"
            )
    fix = {
        "memory": "decode reads the weights near the memory's bandwidth: only fewer bytes per "
        "token make it faster (int4 weights, a smaller model, a batch of sequences sharing "
        "each read)",
        "overhead": "decode runs far from the memory's bandwidth: each step's fixed "
        "costs (thread wake-ups, many small ops, copies of the cache) dominate; the settings "
        "measured in generation below are what moves them",
        "": "see the phases in ortlab.generate(model).by_phase() and .weights",
    }[bound]
    share = decode / (ttft + decode) if ttft + decode > 0 else math.nan
    return [
        Finding(
            rule="decoder_phases",
            title=f"Decode is {share:.0%} of generating {gen.new_tokens} tokens after a "
            f"{gen.prompt}-token prompt",
            evidence=f"time to first token {fmt_ms(ttft)} (the prefill); decode "
            f"{fmt_rate(tokens_per_s(1, per_token), 'tokens/s')} ({fmt_ms(per_token)} per token; "
            f"{gen.measured}); " + "; ".join(parts),
            fix=fix,
            code=f"ortlab.generate(model, prompt={gen.prompt}, new_tokens={gen.new_tokens})"
            ".weights",
            gain=f"measured: the times {gen.measured}, profiling off; the node shares and the "
            "weights' rates from one profiled generation",
            severity="info",
        )
    ]


def decoder_trials(f: Facts) -> list[Finding]:
    """Each candidate whose decode (or, for a prefill of TTFT_FLOOR_MS or more, its time to
    first token) was significantly faster than the baseline's in interleaved generations; a
    variant (int4 of an fp32 decoder) only with its KL divergence from the model shown, and
    saying whether it changes the greedy tokens."""
    gen = f.generation
    if gen is None:
        return []
    caveat = load_caveat(f)
    out = []
    for t in gen.trials:
        phases = [("decode", t.decode)]
        if t.base_ttft_ms >= TTFT_FLOOR_MS:
            phases.append(("time to first token", t.ttft))
        faster = [(what, p) for what, p in phases if p.significant and p.ratio < 1]
        if not faster:
            continue
        what, p = faster[0]
        variant = t.variant != gen.baseline.model
        if variant and t.quality is None:
            continue  # a variant is proposed only with its divergence from the model shown
        kept = (
            f"; it generates the baseline's {t.tokens} greedy tokens"
            if t.tokens_kept == t.tokens
            else f"; it changes the generated text from token {t.tokens_kept + 1} of "
            f"{t.tokens} (greedy decoding diverges for good there): check its answers"
        )
        if t.quality is not None:
            kept += f"; {t.quality.sentence()}"
        saved = (t.base_decode_ms - t.decode_ms) * (gen.new_tokens - 1) + (
            t.base_ttft_ms - t.ttft_ms
        )
        out.append(
            Finding(
                rule="decoder_generation",
                title=f"{t.label}: {what} {1 / p.ratio:.2f}x faster in generation"
                + (" (measured under load)" if caveat else ""),
                evidence=f"decode {fmt_num(t.base_decode_tokens_per_s)} → "
                f"{fmt_rate(t.decode_tokens_per_s, 'tokens/s')} ({t.decode.verdict}); time to "
                f"first token {fmt_ms(t.base_ttft_ms)} → {fmt_ms(t.ttft_ms)} ({t.ttft.verdict}); "
                f"{gen.rounds} rounds of a {gen.prompt}-token prompt and {gen.new_tokens} new "
                f"tokens, interleaved with the baseline{kept}" + (f"; {caveat}" if caveat else ""),
                fix=f"generate with {t.label}",
                code=t.code,
                gain=p.verdict,
                ratio=p.ratio,
                low=p.low,
                high=p.high,
                saved_ms=max(saved, 0.0),
                severity="warning" if t.tokens_kept == t.tokens else "info",
                key=t.key,
            )
        )
    return out
