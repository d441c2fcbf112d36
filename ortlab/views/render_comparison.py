"""Renderers of comparisons between runs: configs timed against the first (interleaved, paired)
and one run diffed against another node by node. Pure functions, no UI library; model strings
through :func:`~ortlab.views.html.esc` and :func:`~ortlab.views.html.safe_text`, as in
:mod:`ortlab.views.render`.
"""

from __future__ import annotations

from typing import Any

from ortlab.core.eps import label as ep_label
from ortlab.core.machine import load_sentence
from ortlab.core.stats import interval_text
from ortlab.core.units import fmt_us
from ortlab.views.html import STYLE, esc, load_html, safe_text, table_html, table_text


def _config_row(r: Any) -> list[Any]:
    p = r.paired
    return [r.label, r.p50_ms, interval_text(p.ratio, p.low, p.high), p.verdict]


def config_comparison_text(c: Any) -> str:
    rows = [_config_row(r) for r in c.rows]
    return (
        f"{safe_text(c.model)}\n"
        + table_text(["config", "p50 ms", "ratio", "verdict"], rows)
        + f"\n{load_sentence(c.other_cores)}"
        + "".join(f"\nnote: {safe_text(n, 600)}" for n in c.notes)
    )


def config_comparison_html(c: Any) -> str:
    rows = [_config_row(r) for r in c.rows]
    return (
        f"<b>{esc(c.model)}</b>"
        + table_html(["config", "p50 ms", "ratio", "verdict"], rows)
        + load_html(c.other_cores)
        + "".join(f"<div><i>{esc(n, 600)}</i></div>" for n in c.notes)
    )


def _diff_rows(d: Any, top: int = 20) -> tuple[list[str], list[list[Any]]]:
    headers = [
        "node",
        "op",
        "A µs",
        "B µs",
        "B − A µs [interval]",
        "verdict",
        "vs run",
        "EP",
        "kernel",
    ]
    t = d.to_pandas()
    t = t[t["verdict"].isin(["slower", "faster"]) | t["moved"] | t["kernel_changed"]]
    rows = [
        [
            r.node,
            r.op_type,
            fmt_us(r.a_us),
            fmt_us(r.b_us),
            interval_text(r.delta_us, r.low, r.high, 1, "+"),
            r.verdict,
            "—" if r.vs_run != r.vs_run else f"x{r.vs_run:.2f}",
            f"{ep_label(r.a_provider)} → {ep_label(r.b_provider)}" if r.moved else "",
            f"{r.a_kernel} → {r.b_kernel}" if r.kernel_changed else "",
        ]
        for r in t.head(top).itertuples()
    ]
    return headers, rows


def _diff_head(d: Any) -> str:
    s = d.summary()
    return (
        f"{d.label_a} → {d.label_b}: whole run x{s['run_ratio']}; {s['slower']} nodes slower, "
        f"{s['faster']} faster of {s['timed_in_both']} timed in both (about "
        f"{s['by_chance_expected']} would be flagged by chance), {s['moved_ep']} moved EP, "
        f"{s['kernel_changed']} changed kernel, {s['only_in_a']} only in A, {s['only_in_b']} "
        "only in B"
    )


def diff_text(d: Any, top: int = 20) -> str:
    return "\n".join([safe_text(_diff_head(d), 800), table_text(*_diff_rows(d, top)), *d.notes])


def diff_html(d: Any, top: int = 20) -> str:
    return (
        f"{STYLE}<div><b>{esc(_diff_head(d), 800)}</b></div>"
        + table_html(*_diff_rows(d, top))
        + "".join(f"<div><i>{esc(n, 400)}</i></div>" for n in d.notes)
    )
