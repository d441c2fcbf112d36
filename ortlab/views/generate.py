"""Renderers of ``ortlab.generate``: the headline (TTFT, prefill and decode tokens/s with their
intervals), the KV cache by formula beside its measured size, time per token against the
cache's length; text, HTML and a figure."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ortlab.core.units import fmt_bandwidth, fmt_bytes, fmt_flops, fmt_interval, fmt_us
from ortlab.views.html import STYLE, esc, inputs_html, safe_text, table_html, table_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.generation.result import GenerationResult

__all__ = [
    "WEIGHTS_HEAD",
    "generate_figure",
    "generate_html",
    "generate_text",
    "generation_headline",
    "weight_cells",
]


def _value(triple: tuple[float, float, float], unit: str) -> str:
    """A (median, low, high) as every interval reads (:func:`fmt_interval`)."""
    return fmt_interval(*triple, unit)


def generation_headline(g: GenerationResult) -> str:
    """THE one line of a decoder's speed, wherever it is shown (the report's Summary, the
    Overview, the Generate tab's top): 'TTFT 0.72 ms [0.69, 0.80] · decode 13,500 tokens/s
    [12,900, 14,100] (median of 6 generations, whole steps, profiling off)'."""
    start = f"the encoder then {g.prompt} start id(s)" if g.encoder_ms else f"prompt {g.prompt}"
    return (
        f"TTFT {_value(g.ttft_ms, 'ms')} · decode "
        f"{_value(g.decode_tokens_per_s, 'tokens/s')} ({start}, {g.new_tokens} new "
        f"tokens; median of {g.runs} generations, whole steps as a generator runs them, "
        "profiling off)"
    )


def _head(g: GenerationResult) -> str:
    return (
        f"{g.model} [{g.config.label()}]: "
        + (
            f"{g.encoder} once, then {g.prompt} start id(s)"
            if g.encoder_ms
            else f"prompt {g.prompt} tokens"
        )
        + f", {g.new_tokens} new, "
        f"batch {g.batch}, {g.runs} runs (measured, profiling off) · {g.decoder}"
    )


def _rows(g: GenerationResult) -> list[list[str]]:
    kv = g.kv_cache
    measured = kv["measured_bytes_per_token"]
    model = [
        [
            "model's own run",
            _value(g.model_decode_tokens_per_s, "tokens/s"),
            f"decode, sess.run alone (TTFT {_value(g.model_ttft_ms, 'ms')})",
        ]
    ]
    encoder = [
        [
            "encoder",
            _value(g.encoder_step_ms, "ms"),
            f"{g.encoder} once per generation, before the decoder (part of TTFT)",
        ]
    ]
    return [
        [
            "time to first token",
            _value(g.ttft_ms, "ms"),
            "the encoder's run and the decoder's first whole step"
            if g.encoder_ms
            else "the prefill's whole step",
        ],
        *(encoder if g.encoder_ms else []),
        ["prefill", _value(g.prefill_tokens_per_s, "tokens/s"), "prompt tokens / TTFT"],
        [
            "decode",
            _value(g.decode_tokens_per_s, "tokens/s"),
            "whole steps after the first token, as a generator runs them",
        ],
        *(model if g.model_ms else []),
        [
            "KV cache per token",
            f"{fmt_bytes(kv['bytes_per_token'])} (formula)",
            f"one buffer of {g.shared_buffer} tokens per growing pair, written in place"
            if g.shared_buffer
            else "present outputs grew by "
            + (fmt_bytes(measured) if not math.isnan(measured) else "—")
            + " per token (measured)",
        ],
        *(
            [
                [
                    "fixed-size state",
                    f"{fmt_bytes(g.fixed_cache_bytes)} (formula)",
                    "held from the first step, whatever the length",
                ]
            ]
            if g.fixed_cache_bytes
            else []
        ),
        [
            f"{'cache and states' if g.fixed_cache_bytes else 'KV cache'} at "
            f"{g.prompt + g.new_tokens - 1} tokens",
            f"{fmt_bytes(kv['peak_bytes'])} (formula)",
            f"{fmt_bytes(kv['measured_peak_bytes'])} in the shared buffers (allocated)"
            if g.shared_buffer
            else f"{fmt_bytes(kv['measured_peak_bytes'])} in the last present outputs (measured)",
        ],
    ]


def _layers(g: GenerationResult) -> tuple[list[str], list[list[str]]]:
    """Phase x layer: each layer's share of the phase's profiled node time."""
    t = g.by_layer()
    phases = list(dict.fromkeys(t["phase"]))
    layers = sorted(set(t["layer"]))
    cell = {(r.phase, r.layer): r for r in t.itertuples()}
    rows = []
    for k in layers:
        name = "outside layers" if k < 0 else f"layer {k}"
        rows.append(
            [name]
            + [
                f"{cell[(p, k)].share:.0%} ({fmt_us(cell[(p, k)].us_per_step)} µs)"
                if (p, k) in cell
                else "—"
                for p in phases
            ]
        )
    return ["", *phases], rows


WEIGHTS_CAPTION = (
    "Weight multiplications against this machine's ceilings (profiled time per step; work "
    "computed from shapes; ceilings measured with ORT). Decode reads every weight once per "
    "token: bandwidth against DRAM's, or that of the nearest cache level (L2, L3) a step's "
    "weights fit, measured there with ORT. The prefill "
    "multiplies the whole prompt: FLOP/s against the GEMM peak:"
)


def weight_cells(w: Any, *, per_token: bool) -> list[str]:
    """One weights row (``GenerationResult.weights`` or ``LLMBenchResult.weights``) as shown:
    nodes, time per step, what they achieved and the ceiling they meet (bandwidth for a step
    that reads each weight once per token, the GEMM peak for a prompt), the share of it."""
    return [
        f"{w.nodes} {w.op_type}",
        f"{fmt_us(w.us_per_step)} µs",
        fmt_bandwidth(w.achieved_bytes) if per_token else fmt_flops(w.achieved_flops, "/s"),
        f"{w.ceiling}: {fmt_bandwidth(w.bandwidth)}"
        if per_token
        else f"{w.dtype} GEMM {fmt_flops(w.peak_flops, '/s')}",
        f"{w.fraction:.1%}" if not math.isnan(w.fraction) else "—",
    ]


WEIGHTS_HEAD = ["nodes", "time per step", "achieved", "ceiling", "of it"]


def _weights(g: GenerationResult) -> tuple[list[str], list[list[str]]]:
    """Per phase and weight op: time per step, what it achieved, the ceiling, the fraction."""
    rows = [
        [r.phase, *weight_cells(r, per_token=r.phase == "decode")] for r in g.weights.itertuples()
    ]
    return ["phase", *WEIGHTS_HEAD], rows


def generate_text(g: GenerationResult) -> str:
    out = [safe_text(_head(g), 600), "", safe_text(generation_headline(g), 600), ""]
    out.append(table_text(["", "median [95 % interval]", ""], _rows(g)))
    if g.profile is not None:
        out += ["", "Per layer, share of each phase's node time (profiled):"]
        out.append(table_text(*_layers(g)))
    if g.roofs:
        out += ["", WEIGHTS_CAPTION, table_text(*_weights(g))]
    out += ["", "tokens: " + " ".join(str(t) for t in g.tokens[:64])]
    out += ["", *(safe_text(n, 600) for n in g.notes)]
    return "\n".join(out)


def generate_html(g: GenerationResult) -> str:
    parts = [
        f"{STYLE}<div><b>{esc(_head(g), 600)}</b></div>",
        f"<div style='font-size:1.15em;margin:4px 0'>{esc(generation_headline(g), 600)}</div>",
        table_html(["", "median [95 % interval]", ""], _rows(g)),
        *(
            [
                "<div>Per layer, share of each phase's node time (profiled):</div>",
                table_html(*_layers(g)),
            ]
            if g.profile is not None
            else []
        ),
        *([f"<div>{esc(WEIGHTS_CAPTION, 600)}</div>", table_html(*_weights(g))] if g.roofs else []),
        f"<div>tokens: {esc(' '.join(str(t) for t in g.tokens[:64]), 800)}</div>",
    ]
    parts += [f"<div><i>{esc(n, 600)}</i></div>" for n in g.notes]
    parts.append(inputs_html("Measured with", g.feeds, g.synthetic))
    return "".join(parts)


def generate_figure(g: GenerationResult) -> go.Figure:
    """Time per token (median over runs) against the tokens cached before it, the range over
    runs as a band, on a log axis (a stalled step on a busy machine stays on the chart without
    flattening the rest); the prefill as its own marker at 0."""
    import plotly.graph_objects as go

    from ortlab.views.figure import layout

    t = g.per_token
    dec = t[t["phase"] == "decode"]
    xs = list(dec["past_length"])
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=xs + xs[::-1],
            y=list(dec["high_ms"]) + list(dec["low_ms"])[::-1],
            fill="toself",
            fillcolor="rgba(31, 119, 180, 0.15)",
            line={"width": 0},
            hoverinfo="skip",
            name="range over runs",
        )
    )
    fig.add_trace(
        go.Scatter(x=xs, y=list(dec["ms"]), mode="lines+markers", name="decode step (median)")
    )
    pre, enc = t[t["phase"] == "prefill"], t[t["phase"] == "encoder"]
    markers = [(pre, "diamond", f"prefill ({g.prompt} tokens)")]
    if len(enc):  # before the decoder's first step: at 0 too, its own marker
        markers.append((enc, "square", f"encoder ({esc(g.encoder)}, once)"))
    for rows, symbol, name in markers:
        fig.add_trace(
            go.Scatter(
                x=[0],
                y=list(rows["ms"]),
                mode="markers",
                marker={"size": 12, "symbol": symbol},
                name=name,
            )
        )
    ys = [v for v in [*dec["low_ms"], *dec["high_ms"], *pre["ms"], *enc["ms"]] if v > 0]
    return layout(
        fig,
        f"{esc(g.model)}: time per token against the tokens cached",
        xaxis_title="tokens cached before the step",
        yaxis_title="ms per step (log)",
        yaxis={"type": "log", **_ticks(min(ys, default=1.0), max(ys, default=1.0))},
    )


def _ticks(low: float, high: float) -> dict[str, list[float] | list[str]]:
    """1-2-5 ticks spanning ``low``..``high``, each labelled at full size (plotly's own log
    ticks label 2 and 5 in small digits)."""
    vals = [
        m * 10.0**d
        for d in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
        for m in (1, 2, 5)
    ]
    vals = [v for v in vals if low / 2.5 <= v <= high * 2.5]
    return {"tickvals": vals, "ticktext": [f"{v:g}" for v in vals]}
