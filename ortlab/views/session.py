"""The session report's room: what ORT did building a session (providers requested and active,
those that did not load and why, the creation stages) as text, HTML and a figure. The
benchmark, profile and placement rooms end with the session's lines (:func:`report_lines`,
:func:`session_report_html`). Pure functions, no UI library; plotly imported inside the
figure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortlab.views.figure import bars
from ortlab.views.html import esc, safe_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.core.sessionreport import SessionReport

__all__ = [
    "creation_stages",
    "report_lines",
    "session_report_figure",
    "session_report_html",
    "session_report_text",
]


def creation_stages(r: SessionReport, top: int = 3) -> str:
    """'load 24 ms, optimize 108 ms (Level1_RuleBasedTransformer 45 ms, …), …' from ORT's log
    timestamps; '' when the session was built without INFO logging."""
    if not r.stages_ms:
        return ""
    slow = [
        (k, v) for k, v in sorted(r.transformer_ms.items(), key=lambda kv: -kv[1])[:top] if v >= 0.5
    ]
    parts = []
    for stage, ms in r.stages_ms.items():
        extra = ""
        if stage == "optimize" and slow:
            extra = " (" + ", ".join(f"{k} {v:.0f} ms" for k, v in slow) + ")"
        parts.append(f"{stage} {ms:.0f} ms{extra}")
    return "session creation: " + ", ".join(parts) + " (ORT's log timestamps)"


def report_lines(r: SessionReport) -> list[str]:
    lines = [f"providers: requested {r.requested}, active {r.active}"]
    if r.stages_ms:
        lines.append(creation_stages(r))
    lines += [f"FALLBACK: {m.provider} did not load. {m.reason}" for m in r.missing]
    lines += [f"note: {n}" for n in r.notes]
    lines += [f"auto: {a}" for a in r.auto_reasons]
    return [safe_text(x, 2000) for x in lines]


def session_report_html(r: SessionReport) -> str:
    out = "".join(
        f'<div class="ortlab-warn">⚠ {esc(m.provider)} did not load: {esc(m.reason, 2000)}</div>'
        for m in r.missing
    )
    out += "".join(f"<div>ℹ {esc(n, 2000)}</div>" for n in r.notes)
    stages = f"<div>{esc(creation_stages(r), 1000)}</div>" if r.stages_ms else ""
    return out + (
        f"<div>runs on <b>{esc(', '.join(r.active))}</b> · ORT {esc(r.ort_version)} · "
        f"session created in {r.create_ms:.1f} ms</div>{stages}"
    )


def session_report_text(r: SessionReport) -> str:
    return "\n".join([repr(r), *(f"  {line}" for line in report_lines(r))])


def session_report_figure(r: SessionReport) -> go.Figure:
    """Requested providers: loaded (green) or not (red), with ORT's reason on hover."""
    why = {m.provider: m.reason for m in r.missing}
    colors = ["#E45756" if p in why else "#54A24B" for p in r.requested]
    return bars(
        "requested execution providers",
        r.requested,
        [1] * len(r.requested),
        "provider",
        "",
        marker_color=colors,
        hovertext=[why.get(p, "loaded") for p in r.requested],
    )
