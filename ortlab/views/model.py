"""The model summary's room: its text, HTML and figure (the op-type histogram). Pure functions,
no UI library; every model string through :func:`~ortlab.views.html.esc` (HTML) and
:func:`~ortlab.views.html.safe_text` (terminals); plotly imported inside the figure."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ortlab.core import cache
from ortlab.core.units import fmt_bytes
from ortlab.views.figure import bars
from ortlab.views.html import STYLE, esc, safe_text, table_html, table_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.core.model import ModelSummary

__all__ = ["model_figure", "model_summary_html", "model_summary_text"]


def _summary_rows(s: ModelSummary) -> list[tuple[str, str]]:
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in s.opsets.items())
    rows = [("kind", s.decoder)] if s.decoder else []
    rows += [("folder", s.folder)] if s.folder else []
    where = f"{Path(s.path).name} (in ortlab's cache)" if cache.is_inside(s.path) else s.path
    rows += [
        (
            "file",
            f"{where} ({fmt_bytes(s.file_bytes)}"
            + (
                f" + {fmt_bytes(s.external_data_bytes)} external data"
                if s.external_data_bytes
                else ""
            )
            + ")",
        ),
        ("IR version", str(s.ir_version)),
        ("opsets", opsets),
        ("producer", s.producer or "—"),
        (
            "nodes",
            f"{s.node_count:,}"
            + (
                f" ({s.node_count_total:,} with {s.subgraph_count} control-flow subgraphs)"
                if s.node_count_total != s.node_count
                else ""
            ),
        ),
        (
            "initializers",
            f"{s.initializer_count:,} ({fmt_bytes(s.initializer_bytes)}"
            + (f", {fmt_bytes(s.external_data_bytes)} external" if s.external_data_bytes else "")
            + ")",
        ),
    ]
    if s.initializers_as_inputs:
        rows.append(
            (
                "warning",
                f"{s.initializers_as_inputs} initializers are also graph inputs: ORT will not "
                "fold or fuse them (IR >= 4)"
                if s.ir_version >= 4
                else f"{s.initializers_as_inputs} initializers listed as inputs (IR < 4: fine)",
            )
        )
    return rows


def _io_rows(s: ModelSummary) -> list[tuple[str, str, str, str]]:
    return [("input", t.name, t.dtype, t.shape_text()) for t in s.inputs] + [
        ("output", t.name, t.dtype, t.shape_text()) for t in s.outputs
    ]


def model_summary_html(s: ModelSummary) -> str:
    ops = list(s.op_types.items())
    top = ", ".join(f"{esc(k)} {v}" for k, v in ops[:12]) + (" …" if len(ops) > 12 else "")
    problems = "".join(f'<div class="ortlab-warn">⚠ {esc(p, 2000)}</div>' for p in s.problems)
    return (
        f"{STYLE}<div class='ortlab-summary'><b>{esc(s.name)}</b>{problems}"
        + table_html(["", ""], _summary_rows(s))
        + table_html(["role", "name", "dtype", "shape"], _io_rows(s))
        + f"<div><b>op types</b>: {top}</div></div>"
    )


def model_summary_text(s: ModelSummary) -> str:
    lines = [f"Model {safe_text(s.name)}"]
    lines += [f"  {k:<13} {safe_text(v, 300)}" for k, v in _summary_rows(s)]
    lines.append("")
    lines.append(table_text(["role", "name", "dtype", "shape"], _io_rows(s)))
    lines.append("")
    lines.append("op types: " + ", ".join(f"{safe_text(k, 60)} {v}" for k, v in s.op_types.items()))
    lines += [f"WARNING: {safe_text(p, 2000)}" for p in s.problems]
    return "\n".join(lines)


def model_figure(s: ModelSummary) -> go.Figure:
    """The op-type histogram of a ModelSummary (subgraphs included)."""
    ops = list(s.op_types.items())[:30]
    return bars(
        f"{esc(s.name)}: op types", [k for k, _ in ops], [v for _, v in ops], "op type", "nodes"
    )
