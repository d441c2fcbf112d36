"""Renderers of ``ortlab.llm_bench``: llama-bench's table (t/s as mean ± standard deviation,
the model's own run beside), each cell's time by layer, and the figures llama-bench users
draw — tg tokens/s against depth, pp tokens/s against prompt length."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortlab.analysis.generation.benchrow import CELL_KEYS
from ortlab.core.units import fmt_num, fmt_pm
from ortlab.views.generate import WEIGHTS_HEAD, weight_cells
from ortlab.views.html import STYLE, esc, safe_text, table_html, table_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.generation.bench import LLMBenchResult

__all__ = ["llm_bench_figure", "llm_bench_html", "llm_bench_text"]

HEAD = ["test", "threads", "n_batch", "t/s (mean ± sd)", "model's run t/s", "reps"]


def _head(r: LLMBenchResult) -> list[str]:
    """:data:`HEAD`, with the sequences where any test carries more than one."""
    return HEAD[:3] + ["sequences"] * _seqs(r) + HEAD[3:]


def _seqs(r: LLMBenchResult) -> bool:
    return any(row.n_seq != 1 for row in r.rows)


def _rows(r: LLMBenchResult) -> list[list[str]]:
    seqs = _seqs(r)
    return [
        [
            row.label,
            str(row.n_threads),
            str(row.n_batch),
            *([str(row.n_seq)] if seqs else []),
            fmt_pm(row.avg_ts, row.stddev_ts),
            fmt_num(row.model_ts),
            str(len(row.samples_ns)),
        ]
        for row in r.rows
    ]


def _layers(r: LLMBenchResult) -> tuple[list[str], list[list[str]]]:
    """Cell x layer: each layer's share of the cell's profiled time."""
    t = r.by_layer()
    if not len(t):
        return [], []
    layers = sorted(set(t["layer"]))
    share = {
        (tuple(row[:-2]), row[-2]): row[-1]
        for row in t[[*CELL_KEYS, "layer", "share"]].itertuples(index=False, name=None)
    }
    head = ["", *("outside layers" if k < 0 else f"layer {k}" for k in layers)]
    rows = [
        [row.setting]
        + [f"{share[(row.key, k)]:.0%}" if (row.key, k) in share else "—" for k in layers]
        for row in r.rows
        if any((row.key, k) in share for k in layers)
    ]
    return head, rows


WEIGHTS_CAPTION = (
    "Each test's weight multiplications against this machine's ceilings (profiled time; work "
    "from the test's shapes; ceilings measured with ORT at its threads): a pp test multiplies "
    "the whole prompt (FLOP/s against the GEMM peak), a tg token reads every weight once "
    "(bandwidth against DRAM's, or the cache's when they fit it):"
)


def _weights(r: LLMBenchResult) -> tuple[list[str], list[list[str]]]:
    """Per cell and weight op: its time per step, what it achieved, the ceiling, the share."""
    settings = {(row.label, *row.key[1:]): row.setting for row in r.rows}
    rows = [
        [
            settings[(w.test, *(getattr(w, k) for k in CELL_KEYS[1:]))],
            *weight_cells(w, per_token=w.test.startswith("tg")),
        ]
        for w in r.weights.itertuples()
    ]
    return ["test", *WEIGHTS_HEAD], rows


def _title(r: LLMBenchResult) -> str:
    return (
        f"{r.model} [{r.config.label()}] · {r.decoder} · {r.repetitions} repetitions per test, "
        "whole steps as a generator runs them"
    )


def llm_bench_text(r: LLMBenchResult) -> str:
    out = [safe_text(_title(r), 600), "", table_text(_head(r), _rows(r))]
    head, rows = _layers(r)
    if rows:
        out += ["", "Share of each test's profiled time by layer:", table_text(head, rows)]
    head, rows = _weights(r)
    if rows:
        out += ["", WEIGHTS_CAPTION, table_text(head, rows)]
    out += ["", *(safe_text(n, 600) for n in r.notes)]
    return "\n".join(out)


def llm_bench_html(r: LLMBenchResult) -> str:
    parts = [f"{STYLE}<div><b>{esc(_title(r), 600)}</b></div>", table_html(_head(r), _rows(r))]
    head, rows = _layers(r)
    if rows:
        parts += [
            "<div>Share of each test's profiled time by layer:</div>",
            table_html(head, rows),
        ]
    head, rows = _weights(r)
    if rows:
        parts += [f"<div>{esc(WEIGHTS_CAPTION, 600)}</div>", table_html(head, rows)]
    parts += [f"<div><i>{esc(n, 600)}</i></div>" for n in r.notes]
    return "".join(parts)


def llm_bench_figure(r: LLMBenchResult, kind: str | None = None) -> go.Figure:
    """``kind`` 'tg' (default): tg tokens/s against depth, a line per test, threads and
    batch, error bars one standard deviation; 'pp': pp tokens/s against prompt length, a line
    per depth, threads and batch."""
    import plotly.graph_objects as go

    from ortlab.views.figure import layout

    gen = (kind or "tg") == "tg"
    lines: dict[str, list[tuple[int, float, float]]] = {}
    for row in r.rows:
        if bool(row.n_gen) != gen:
            continue
        extra = row.setting.split(" · ", 1)[1]  # the cell beyond its test: threads…
        name = f"{row.test} · {extra}" if gen else f"depth {row.n_depth} · {extra}"
        x = row.n_depth if gen else row.n_prompt
        lines.setdefault(name, []).append((x, row.avg_ts, row.stddev_ts))
    fig = go.Figure()
    for name, points in lines.items():
        points.sort()
        fig.add_trace(
            go.Scatter(
                x=[p[0] for p in points],
                y=[p[1] for p in points],
                error_y={"type": "data", "array": [p[2] for p in points]},
                mode="lines+markers",
                name=esc(name),
            )
        )
    what = "token generation against the tokens cached" if gen else "prompt processing"
    return layout(
        fig,
        f"{esc(r.model)}: {what} (mean ± sd over {r.repetitions} repetitions)",
        xaxis_title="depth (tokens cached before the test)" if gen else "prompt tokens",
        yaxis_title="tokens/s",
    )
