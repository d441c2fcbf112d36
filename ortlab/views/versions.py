"""Text, HTML and the figure of a ``version_diff``: one model under two onnxruntime versions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortlab.core.units import fmt_us
from ortlab.views.diff import shift_cells, shift_headers
from ortlab.views.figure import shift_figure, timed_shifts
from ortlab.views.html import STYLE, esc, inputs_html, safe_text, table_html, table_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.versions import VersionDiffResult

__all__ = ["versions_figure", "versions_html", "versions_text"]


def _head(r: VersionDiffResult) -> str:
    s = r.summary()
    a, b = r.loaded
    return (
        f"{r.model}: onnxruntime {a} → {b}: whole run x{s['run_ratio']}; {s['slower']} nodes "
        f"slower, {s['faster']} faster of {s['timed_in_both']} timed in both (about "
        f"{s['by_chance_expected']} would be flagged by chance); {s['kernel_changed']} changed "
        f"kernel, {s['fusion_changed']} changed fusion, {s['only_in_a']} only in A, "
        f"{s['only_in_b']} only in B"
    )


def _rows(r: VersionDiffResult, top: int) -> tuple[list[str], list[list[object]]]:
    """The nodes that changed (time, kernel or fusion), then the largest shifts."""
    a, b = r.loaded
    headers = [*shift_headers(a, b), "kernel", "fusion"]
    t = r.to_pandas()
    changed = t["verdict"].isin(["slower", "faster", "only in A", "only in B"])
    changed |= t["kernel_changed"] | t["fusion_changed"].fillna(False).astype(bool)
    t = t[changed] if changed.any() else t
    rows = [
        [
            *shift_cells(x),
            f"{_kernel(x.a_kernel, x.a_domain)} → {_kernel(x.b_kernel, x.b_domain)}"
            if x.kernel_changed
            else _kernel(x.a_kernel, x.a_domain),
            f"{x.a_status} [{x.a_group or 'alone'}] → {x.b_status} [{x.b_group or 'alone'}]"
            if x.fusion_changed
            else "",
        ]
        for x in t.head(top).itertuples()
    ]
    return headers, rows


def _kernel(op: str, domain: object) -> str:
    return f"{op} ({domain})" if isinstance(domain, str) and domain else op


def _inserted(r: VersionDiffResult) -> tuple[list[str], list[list[object]]]:
    a, b = r.loaded
    headers = ["inserted kernel", f"{a} count", f"{b} count", f"{a} µs", f"{b} µs"]
    rows = [[k.op_type, k.a_count, k.b_count, fmt_us(k.a_us), fmt_us(k.b_us)] for k in r.inserted]
    return headers, rows


def versions_text(r: VersionDiffResult, top: int = 20) -> str:
    parts = [safe_text(_head(r), 800), table_text(*_rows(r, top))]
    if r.inserted:
        parts.append(table_text(*_inserted(r)))
    return "\n".join([*parts, *r.notes])


def versions_html(r: VersionDiffResult, top: int = 20) -> str:
    out = (
        f"{STYLE}<div><b>{esc(_head(r), 800)}</b></div>"
        + inputs_html("Node times", r.feeds, r.synthetic)
        + table_html(*_rows(r, top))
    )
    if r.inserted:
        out += table_html(*_inserted(r))
    return out + "".join(f"<div><i>{esc(n, 400)}</i></div>" for n in r.notes)


def versions_figure(r: VersionDiffResult, top: int = 25) -> go.Figure:
    """B - A per node with its interval, the largest shifts (red slower, blue faster), the
    nodes whose kernel or fusion changed marked."""
    t = timed_shifts(r.to_pandas(), top)
    mark = [
        " *" if k or f else ""
        for k, f in zip(t["kernel_changed"], t["fusion_changed"], strict=True)
    ]
    names = [esc(f"{n} ({o}){m}") for n, o, m in zip(t["node"], t["op_type"], mark, strict=True)]
    hover = [
        esc(f"{v}; kernel {ka} → {kb}")
        for v, ka, kb in zip(t["verdict"], t["a_kernel"], t["b_kernel"], strict=True)
    ]
    a, b = r.loaded
    title = (
        f"{esc(r.model)}: onnxruntime {esc(a)} → {esc(b)}, per node (* kernel or fusion changed)"
    )
    return shift_figure(t, names, hover, title, "µs per run, B − A")
