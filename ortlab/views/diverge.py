"""The first divergence's room: where two runs stop agreeing, as text, HTML and a figure of the
error along the graph. Pure functions; every model string through :func:`esc` or
:func:`safe_text`; plotly imported inside the figure."""

from __future__ import annotations

import math

from ortlab.analysis.diverge import DivergenceResult, TensorDivergence
from ortlab.views.figure import layout
from ortlab.views.html import STYLE, esc, safe_text, table_html, table_text

__all__ = ["diverge_figure", "diverge_html", "diverge_text"]

HEAD = ["#", "tensor", "node", "op", "cosine", "max abs", "relative", "introduced"]
AROUND = 12
"""Rows the tables show: those before and after the first divergence (or the first past the
threshold), the rest in ``to_pandas()``."""


def _number(x: float, digits: int = 6) -> str:
    return "—" if math.isnan(x) else f"{x:.{digits}g}"


def _rows(d: DivergenceResult) -> list[TensorDivergence]:
    past = [k for k, t in enumerate(d.tensors) if d.error(t) > d.threshold]
    at = next(
        (k for k, t in enumerate(d.tensors) if d.first and t.tensor == d.first.tensor),
        past[0] if past else 0,
    )
    return d.tensors[max(at - 3, 0) : at + AROUND]


def _cells(d: DivergenceResult) -> list[list[str]]:
    return [
        [
            str(t.index),
            t.tensor,
            t.node,
            t.op_type,
            _number(t.cosine, 8),
            _number(t.max_abs),
            _number(t.relative),
            _number(t.introduced),
        ]
        for t in _rows(d)
    ]


def headline(d: DivergenceResult) -> str:
    """The result in one sentence: the first divergence, or why there is none."""
    what = f"{d.reference} vs {d.other} ({d.metric} error > {d.threshold:g})"
    if d.first is None and not any(d.error(t) > d.threshold for t in d.tensors):
        return f"{what}: they agree within the threshold on every tensor both compute"
    if d.first is None:
        return f"{what}: no node introduces a divergence that reproduces (see the notes)"
    f = d.first
    before = [n for n in f.region if n != f.node]
    alone = (
        f"when run alone with {', '.join(map(repr, before))} (the nodes before it that it "
        "needs) on the reference's inputs"
        if before
        else "when run alone on the reference's inputs"
    )
    how = (
        "with only its tensor exposed, found by bisection"
        if f.found_by == "bisect"
        else "with every tensor exposed"
    )
    return (
        f"{what}: the first divergence is node {f.node!r} ({f.op_type}, #{f.index} in graph "
        f"order): its output's error {f.error:.4g} {how}, {f.introduced:.4g} {alone}; found "
        f"in {d.session_runs} session runs"
    )


def built(d: DivergenceResult) -> list[str]:
    """How each side built the first divergence's region alone: its EP and what ORT made of
    it (a fusion shows as other nodes)."""
    f = d.first
    if f is None:
        return []
    out = []
    for side, provider, kernels in zip((d.reference, d.other), f.providers, f.kernels, strict=True):
        made = ", ".join(kernels[:6]) + (
            f" and {len(kernels) - 6} more" if len(kernels) > 6 else ""
        )
        out.append(
            f"{side} runs it on {provider or 'an EP ORT did not name'}"
            + (f" as {made}" if made else " (compiled: ORT cannot list its kernels)")
        )
    return out


PROBE_HEAD = ["#", "tensor exposed alone", "error", "worst final output's error"]


def _probes(d: DivergenceResult) -> list[list[str]]:
    return [[str(p.index), p.tensor, _number(p.error), _number(p.finals_error)] for p in d.probes]


def _probe_caption(d: DivergenceResult) -> str:
    return (
        f"The bisection ({len(d.probes)} probes, graph order): each tensor exposed alone, ORT "
        f"fusing everywhere else as it runs; its {d.metric} error against the threshold "
        f"{d.threshold:g}"
    )


def _finals(d: DivergenceResult) -> list[str]:
    return [
        f"final output {f.output}: cosine {f.plain_cosine:.8f} as the sessions run "
        f"(max abs {f.plain_max_abs:.4g}), {f.exposed_cosine:.8f} with the tensors exposed"
        for f in d.finals
    ]


MATRIX_HEAD = ["EPs", "level", "worst output cosine", "max abs", "diverges"]


def _matrix(d: DivergenceResult) -> list[list[str]]:
    return [
        [c.providers, c.level, f"{c.cosine:.8f}", _number(c.max_abs), "yes" if c.diverges else ""]
        for c in d.matrix
    ]


def _matrix_caption(d: DivergenceResult) -> str:
    return (
        "The EP x level grid (each cell's final outputs, nothing exposed, against the first "
        f"cell): {d.matrix_verdict}"
    )


def diverge_text(d: DivergenceResult) -> str:
    lines = [
        safe_text(headline(d), 600),
        *(safe_text(x, 400) for x in built(d)),
        *(safe_text(x, 400) for x in _finals(d)),
        *(
            [safe_text(_matrix_caption(d), 600), table_text(MATRIX_HEAD, _matrix(d))]
            if d.matrix
            else []
        ),
        *([_probe_caption(d) + ":", table_text(PROBE_HEAD, _probes(d))] if d.probes else []),
        f"Tensors around it (of {len(d.tensors)}, graph order, all exposed; introduced: the "
        "node alone on the reference's inputs):",
        table_text(HEAD, _cells(d)),
        *(f"note: {safe_text(n, 800)}" for n in d.notes),
        safe_text(f"Inputs: {d.feeds}" + (" (synthetic)" if d.synthetic else ""), 600),
    ]
    return "\n".join(lines)


def diverge_html(d: DivergenceResult) -> str:
    return (
        f"{STYLE}<div class='ortlab-diverge'><div><b>{esc(headline(d), 600)}</b></div>"
        + "".join(f"<div>{esc(x, 400)}</div>" for x in [*built(d), *_finals(d)])
        + (
            f"<div>{esc(_matrix_caption(d), 600)}</div>" + table_html(MATRIX_HEAD, _matrix(d))
            if d.matrix
            else ""
        )
        + (
            f"<div>{esc(_probe_caption(d), 400)}</div>" + table_html(PROBE_HEAD, _probes(d))
            if d.probes
            else ""
        )
        + f"<div>Tensors around it (of {len(d.tensors)}, graph order, all exposed; introduced: "
        "the node alone on the reference's inputs)</div>"
        + table_html(HEAD, _cells(d))
        + "".join(f"<div><i>{esc(n, 800)}</i></div>" for n in d.notes)
        + f"<div>Inputs: {esc(d.feeds, 600)}{' (synthetic)' if d.synthetic else ''}</div></div>"
    )


def diverge_figure(d: DivergenceResult) -> object:
    """The error (the metric) of every tensor in graph order, log scale, with the threshold
    and the first divergence marked."""
    import plotly.graph_objects as go

    floor = d.threshold / 1e3
    ys = [max(d.error(t), floor) for t in d.tensors]
    fig = go.Figure(
        go.Scatter(
            x=[t.index for t in d.tensors],
            y=ys,
            mode="lines+markers",
            name=f"{d.metric} error",
            text=[esc(f"{t.node} ({t.op_type})") for t in d.tensors],
            hovertemplate="%{text}<br>error %{y:.3g}<extra></extra>",
        )
    )
    fig.add_hline(y=d.threshold, line_dash="dash")
    fig.add_annotation(  # on a log axis an annotation's y is log10 of the value
        x=1,
        xref="paper",
        y=math.log10(d.threshold),
        yref="y",
        text=f"threshold {d.threshold:g}",
        showarrow=False,
        xanchor="right",
        yanchor="bottom",
    )
    if d.first is not None:
        fig.add_trace(
            go.Scatter(
                x=[d.first.index],
                y=[max(d.first.error, floor)],
                mode="markers",
                marker={"size": 14, "color": "#c0392b", "symbol": "x"},
                name=esc(f"first: {d.first.node} ({d.first.op_type})"),
            )
        )
    title = f"{esc(d.reference)} vs {esc(d.other)}: {d.metric} error per tensor"
    return layout(
        fig,
        title,
        xaxis_title="node (graph order)",
        yaxis_title=f"{d.metric} error (log; 0 drawn at {floor:g})",
        yaxis_type="log",
        yaxis_dtick=1,  # a label a decade (plotly's 2 and 5 between them are 9 px)
        height=380,
    )
