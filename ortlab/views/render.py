"""Renderers of the first screen's results to HTML and terminal text: the model summary, the
session (what ORT did building it), the benchmark, the profile and the placement. Pure
functions, no UI library; every model string through :mod:`ortlab.views.html`'s
:func:`~ortlab.views.html.esc` (HTML) and :func:`~ortlab.views.html.safe_text` (terminals).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ortlab.core.machine import load_sentence
from ortlab.core.units import fmt_bytes
from ortlab.views.html import STYLE, esc, safe_text, table_html, table_text

if TYPE_CHECKING:
    from ortlab.analysis.benchmark import BenchmarkResult
    from ortlab.analysis.profiling import ProfileResult
    from ortlab.core.model import ModelSummary
    from ortlab.core.sessionreport import SessionReport


# ---------------------------------------------------------------- model summary


def _summary_rows(s: ModelSummary) -> list[tuple[str, str]]:
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in s.opsets.items())
    rows = [("kind", s.decoder)] if s.decoder else []
    rows += [
        (
            "file",
            f"{s.path} ({fmt_bytes(s.file_bytes)}"
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


# ---------------------------------------------------------------- session report


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


# ---------------------------------------------------------------- benchmark


def _stats_rows(b: BenchmarkResult) -> list[tuple[str, float]]:
    s = b.stats
    return [
        ("p50", s.p50_ms),
        ("p90", s.p90_ms),
        ("p95", s.p95_ms),
        ("p99", s.p99_ms),
        ("mean", s.mean_ms),
        ("std", s.std_ms),
        ("min", s.min_ms),
        ("max", s.max_ms),
    ]


def p50_text(b: BenchmarkResult) -> str:
    """The median run with its interval: "p50 1.93 ms [1.70, 2.10] (96.9 % interval)"."""
    low, high, coverage = b.p50_interval
    if math.isnan(coverage):
        return f"p50 {b.stats.p50_ms:.3f} ms (too few runs for an interval: 6 or more)"
    return (
        f"p50 {b.stats.p50_ms:.3f} ms [{low:.3f}, {high:.3f}] ({coverage:.1%} interval of "
        "the median run, distribution-free)"
    )


def load_text(b: BenchmarkResult) -> str:
    """The machine's load while ``b`` was timed, and what it means for the numbers."""
    return load_sentence(b.other_cores, b.environment.get("cpu_count"))


def benchmark_text(b: BenchmarkResult) -> str:
    s = b.stats
    lines = [
        f"Benchmark {safe_text(b.model)} [{b.config.label()}]: {s.count} runs after "
        f"{b.warmup} warm-up, profiling off",
        p50_text(b),
        load_text(b),
        table_text(["stat", "ms"], _stats_rows(b)),
        f"{s.runs_per_s:,.1f} runs/s one after another (1000 / mean; requests/s under "
        "concurrency: ortlab.throughput)",
        f"feeds: {safe_text(b.feeds, 500)}",
        *report_lines(b.report),
    ]
    return "\n".join(lines)


def benchmark_html(b: BenchmarkResult) -> str:
    s = b.stats
    return (
        f"{STYLE}<div><b>{esc(b.model)}</b> · {esc(b.config.label())} · {s.count} "
        f"runs (+{b.warmup} warm-up) · {s.runs_per_s:,.1f} runs/s · profiling off</div>"
        f"<div><b>{esc(p50_text(b))}</b></div>"
        f"<div{' class=ortlab-warn' if b.busy else ''}>{esc(load_text(b))}</div>"
        + table_html(["stat", "ms"], _stats_rows(b))
        + f"<div>feeds: {esc(b.feeds, 500)}</div>"
        + session_report_html(b.report)
    )


# ---------------------------------------------------------------- profile


def kernel_label(kernel: str, originals: Sequence[str]) -> str:
    """A kernel of ORT's final graph named by the original nodes it computes (what the graph
    view and Netron show): ``p2o.Conv.12 + 2 more (kernel r169_nchwc)``; a kernel that is
    an original node of its own keeps its name."""
    rest = [n for n in originals if n != kernel]
    if not rest:
        return kernel
    if kernel in originals:
        return f"{kernel} (+{len(rest)} fused)"
    more = f" + {len(rest) - 1} more" if len(rest) > 1 else ""
    return f"{rest[0]}{more} (kernel {kernel})"


def fused_map(placement: Any, profile: ProfileResult) -> dict[str, tuple[str, ...]]:
    """Per kernel of ``profile``, the original nodes it computes, from a placement join of the
    same session settings (empty when there is none, or its settings differ: kernel names
    depend on the optimization level)."""
    if placement is None or getattr(placement, "config", None) != profile.config:
        return {}
    return {r.node: r.fused_from for r in placement.optimized_rows}


def profile_node_rows(
    p: ProfileResult, top: int, fused: Mapping[str, Sequence[str]] | None = None
) -> tuple[list[str], list[list[Any]]]:
    """The table of the slowest nodes (the Profile tab's, the Lab snapshot's, the report's
    and the CLI's): a kernel is named by the original nodes it computes when ``fused``
    (:func:`fused_map`) knows them."""
    t = p.by_node().head(top)
    fused = fused or {}
    headers = ["node", "op_type", "provider", "µs/run (median run)", "share", "total µs"]
    rows = [
        [
            kernel_label(r.node, fused.get(r.node, ())),
            r.op_type,
            r.provider,
            float(r.us_per_run),
            f"{r.share:.1%}",
            float(r.total_us),
        ]
        for r in t.itertuples()
    ]
    return headers, rows


def _op_rows(p: ProfileResult) -> tuple[list[str], list[list[Any]]]:
    t = p.by_op_type()
    headers = ["op_type", "provider", "nodes", "µs/run (median run)", "share"]
    rows = [
        [r.op_type, r.provider, int(r.nodes), float(r.us_per_run), f"{r.share:.1%}"]
        for r in t.itertuples()
    ]
    return headers, rows


def profile_text(
    p: ProfileResult, top: int = 15, fused: Mapping[str, Sequence[str]] | None = None
) -> str:
    parts = [
        f"Profile {safe_text(p.model)}: {len(p.data.node)} nodes, session init "
        f"{p.data.session_init_us / 1e3:.1f} ms",
        f"Times: {p.conditions}",
        "",
        "By op type:",
        table_text(*_op_rows(p)),
        "",
        f"Top {top} nodes:",
        table_text(*profile_node_rows(p, top, fused)),
    ]
    if p.report is not None:
        parts += ["", *report_lines(p.report)]
    parts += ["", *(f"note: {n}" for n in p.notes[:1])]
    return "\n".join(parts)


def profile_html(
    p: ProfileResult, top: int = 15, fused: Mapping[str, Sequence[str]] | None = None
) -> str:
    return (
        f"{STYLE}<div><b>{esc(p.model)}</b> · {len(p.data.node)} nodes · "
        f"session init {p.data.session_init_us / 1e3:.1f} ms</div>"
        + _conditions_html(p)
        + table_html(*_op_rows(p))
        + table_html(*profile_node_rows(p, top, fused))
        + (session_report_html(p.report) if p.report else "")
        + "".join(f"<div><i>{esc(n, 500)}</i></div>" for n in p.notes[:1])
    )


def _conditions_html(p: ProfileResult) -> str:
    """The profile's conditions line (``ProfileResult.conditions``), in the warning colour when
    the machine was busy."""
    cls = ' class="ortlab-warn"' if p.busy else ""
    return f"<div{cls}>Times: {esc(p.conditions, 600)}</div>"


# ---------------------------------------------------------------- placement


def _placement_summary_rows(pl: Any) -> tuple[list[str], list[list[Any]]]:
    headers = [
        "provider",
        "nodes",
        "node share",
        "partitions",
        "µs/run (median run)",
        "time share",
        "outputs/run",
    ]
    rows = [
        [
            r.provider,
            int(r.nodes),
            f"{r.node_share:.0%}",
            int(r.partitions),
            float(r.us_per_run),
            f"{r.time_share:.0%}",
            fmt_bytes(r.output_bytes),
        ]
        for r in pl.summary().itertuples()
    ]
    return headers, rows


def _partition_rows(pl: Any, limit: int = 30) -> tuple[list[str], list[list[Any]]]:
    headers = ["#", "provider", "original nodes", "inputs", "outputs", "µs/run (median run)"]
    rows = [
        [
            p.partition,
            p.provider + (" (compiled)" if p.compiled else ""),
            len(p.original_nodes),
            ", ".join(p.inputs[:4]) + (" …" if len(p.inputs) > 4 else ""),
            ", ".join(p.outputs[:4]) + (" …" if len(p.outputs) > 4 else ""),
            float(p.us_per_run),
        ]
        for p in pl.partition_rows[:limit]
    ]
    return headers, rows


def _boundary_rows(pl: Any, limit: int = 30) -> tuple[list[str], list[list[Any]]]:
    headers = ["tensor", "from", "to", "bytes"]
    rows = [
        [
            b.tensor,
            f"{b.producer} ({b.producer_provider.removesuffix('ExecutionProvider')})",
            f"{b.consumer} ({b.consumer_provider.removesuffix('ExecutionProvider')})",
            b.bytes,
        ]
        for b in pl.boundary_rows[:limit]
    ]
    return headers, rows


def _placement_reason_rows(pl: Any, limit: int = 12) -> tuple[list[str], list[list[Any]]]:
    headers = ["why", "nodes", "e.g.", "fix"]
    rows = [
        [r.reason, int(r.nodes), r.examples, r.fix] for r in pl.reasons().head(limit).itertuples()
    ]
    return headers, rows


def _why_title(pl: Any) -> str:
    return f"Why nodes are not on {pl.wanted.removesuffix('ExecutionProvider')}"


def _placement_times(pl: Any) -> str:
    if pl.profile is not None:
        return str(pl.profile.conditions)
    return f"each node's median of {pl.runs} run(s), ORT's profiler on"


def placement_text(pl: Any) -> str:
    parts = [
        f"Placement of {safe_text(pl.model)} (final graph from {pl.final_source})",
        f"Times: {_placement_times(pl)}",
        table_text(*_placement_summary_rows(pl)),
        "",
        f"Partitions ({len(pl.partition_rows)}):",
        table_text(*_partition_rows(pl)),
        "",
        f"EP boundaries ({len(pl.boundary_rows)}):",
        table_text(*_boundary_rows(pl)) if pl.boundary_rows else "  none: one EP runs it all",
        "",
        *(
            [f"{_why_title(pl)}:", table_text(*_placement_reason_rows(pl)), ""]
            if pl.wanted and len(pl.reasons())
            else []
        ),
        *report_lines(pl.report),
    ]
    return "\n".join(parts)


def placement_html(pl: Any) -> str:
    return (
        f"{STYLE}<div><b>{esc(pl.model)}</b> · placement</div>"
        + (
            _conditions_html(pl.profile)
            if pl.profile is not None
            else f"<div>Times: {esc(_placement_times(pl))}</div>"
        )
        + table_html(*_placement_summary_rows(pl))
        + f"<div><b>Partitions</b> ({len(pl.partition_rows)})</div>"
        + table_html(*_partition_rows(pl))
        + f"<div><b>EP boundaries</b> ({len(pl.boundary_rows)})</div>"
        + (table_html(*_boundary_rows(pl)) if pl.boundary_rows else "<div>none</div>")
        + (
            f"<div><b>{esc(_why_title(pl))}</b></div>" + table_html(*_placement_reason_rows(pl))
            if pl.wanted and len(pl.reasons())
            else ""
        )
        + session_report_html(pl.report)
    )
