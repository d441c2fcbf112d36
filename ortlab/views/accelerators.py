"""Where a model can run: the what-if (predicted placement on accelerators that are not here, and
why nodes fall back) as text, HTML and a figure, and the providers onnxruntime has here as
text. Pure functions, no UI library; model strings through :func:`~ortlab.views.html.esc` and
:func:`~ortlab.views.html.safe_text`; plotly imported inside the figure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortlab.views.colors import provider_color
from ortlab.views.figure import layout
from ortlab.views.html import STYLE, esc, safe_text, table_html, table_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.placement.whatifresult import WhatIfResult
    from ortlab.core.runtime import Providers


def _whatif_rows(w: WhatIfResult) -> tuple[list[str], list[list[object]]]:
    headers = ["target", "evidence", "on target", "on CPU", "removed", "partitions", "seconds"]
    rows = []
    for t in w.summary().itertuples():
        predicted = t.evidence in ("compiled", "rules", "measured")
        rows.append(
            [
                t.target,
                t.evidence,
                int(t.on_target) if predicted else "-",
                int(t.on_cpu) if predicted else "-",
                int(t.removed) if predicted else "-",
                int(t.partitions) if predicted else "-",
                round(float(t.seconds), 2),
            ]
        )
        if t.before >= 0:
            rows[-1][2] = f"{t.before} → {int(t.on_target)}" if predicted else "-"
    return headers, rows


def _whatif_reason_rows(w: WhatIfResult, limit: int = 20) -> tuple[list[str], list[list[object]]]:
    r = w.reasons()
    rows = [
        [x.target, x.reason, int(x.nodes), x.examples, x.fix] for x in r.head(limit).itertuples()
    ]
    return ["target", "reason", "nodes", "examples", "fix"], rows


def _whatif_target_notes(w: WhatIfResult) -> list[str]:
    return [f"{t.target}: {t.reason}" for t in w.targets if t.evidence in ("unknown", "failed")]


def _level(w: WhatIfResult) -> str:
    """The level the predicted sessions were built at, said when a config chose it."""
    return f", level {w.level}" if w.level != "basic" else ""


def whatif_text(w: WhatIfResult, top: int = 20) -> str:
    before = " (on target: before → after fixing the shapes)" if w.before else ""
    parts = [
        f"What-if for {safe_text(w.model)} at {safe_text(w.feeds, 300)}{_level(w)}{before}",
        table_text(*_whatif_rows(w)),
        "",
        "Why nodes fall back:",
        table_text(*_whatif_reason_rows(w, top)),
        "",
        *(safe_text(n, 600) for n in _whatif_target_notes(w)),
        *(safe_text(n, 600) for n in w.notes),
    ]
    return "\n".join(parts)


def whatif_html(w: WhatIfResult, top: int = 20) -> str:
    notes = "".join(f"<div>{esc(n, 600)}</div>" for n in [*_whatif_target_notes(w), *w.notes])
    before = " · on target: before → after fixing the shapes" if w.before else ""
    return (
        f"{STYLE}<div><b>{esc(w.model)}</b> · what-if (predicted, not measured) at "
        f"{esc(w.feeds, 300)}{esc(_level(w))}{before}</div>"
        + table_html(*_whatif_rows(w))
        + "<div><b>Why nodes fall back</b></div>"
        + table_html(*_whatif_reason_rows(w, top))
        + notes
    )


def providers_text(p: Providers) -> str:
    """``ortlab providers``: the build's EPs, those that load here and why, plugins, devices."""
    lines = [
        f"onnxruntime {safe_text(p.ort_version)}",
        f"in this build: {', '.join(p.in_build)}",
        f"really load here: {', '.join(p.loadable)}",
        *(f"  - {safe_text(r, 400)}" for r in p.reasons),
        "plugin EPs (select them by name: ortlab picks their devices):"
        if p.plugins
        else "plugin EPs: none installed (e.g. pip install --no-deps onnxruntime-qnn)",
    ]
    for e in p.plugins:
        where = ", ".join(e.devices) or "no device on this machine"
        state = f"failed to register: {e.error}" if e.error else f"devices: {where}"
        lines.append(f"  - {safe_text(e.name)} ({safe_text(e.module)} {e.version}): {state}")
    lines.append("devices: " + ", ".join(f"{d.ep_name} on {d.device_type}" for d in p.devices))
    return "\n".join(lines)


def whatif_figure(w: WhatIfResult) -> go.Figure:
    """Predicted nodes on each target vs on the CPU (stacked bars); targets with no
    prediction (unknown, failed) are listed with an empty bar."""
    import plotly.graph_objects as go

    t = w.summary()
    labels = [f"{r.target} ({r.evidence})" for r in t.itertuples()]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=t["on_target"], name="on target", marker_color="#F58518"))
    fig.add_trace(
        go.Bar(
            x=labels, y=t["on_cpu"], name="CPU", marker_color=provider_color("CPUExecutionProvider")
        )
    )
    fig.add_trace(
        go.Bar(x=labels, y=t["removed"], name="removed before partitioning", marker_color="#BAB0AC")
    )
    fig.update_layout(barmode="stack")
    return layout(
        fig,
        f"{esc(w.model)}: where it would run (predicted)",
        yaxis_title="original nodes",
        height=380,
    )
