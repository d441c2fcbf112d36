"""Renderers: results to HTML and terminal text. Pure functions, no UI library.

Every string that comes from a model (node, tensor, op, domain and metadata names) goes through
:func:`esc` for HTML and :func:`safe_text` for terminals: it is shown as text, never interpreted
as markup or as terminal control sequences.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ortlab.core.cache import cache_dir
from ortlab.core.machine import load_sentence
from ortlab.core.units import fmt_bytes

if TYPE_CHECKING:
    from ortlab.analysis.benchmark import BenchmarkResult
    from ortlab.analysis.profiling import ProfileResult
    from ortlab.core.model import ModelSummary
    from ortlab.core.sessionreport import SessionReport

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_MAX_CELL = 200


def safe_text(value: object, limit: int = _MAX_CELL) -> str:
    """Text for a terminal: control characters (ANSI escapes, bidi overrides) made visible."""
    text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def esc(value: object, limit: int = _MAX_CELL) -> str:
    """HTML-escaped text (quotes included), control characters made visible, length capped."""
    return html.escape(safe_text(value, limit), quote=True)


# ---------------------------------------------------------------- data inside <script>

# In a <script> element the HTML parser ends the element at "</script" and changes state at
# "<!--", whatever JavaScript would make of the text; U+2028/U+2029 end a line in pre-ES2019
# JavaScript. Escaped as \uXXXX these characters mean the same inside JSON strings (the only
# place JSON can hold them), so the value is unchanged and the parser never sees markup.
_SCRIPT_UNSAFE = re.compile("[<>&\u2028\u2029]")


def script_json(value: Any) -> str:
    """``value`` as JSON that is inert inside an HTML ``<script>`` element.

    The one way ortlab puts data into a script: every page it writes (graph ``to_html``, the
    report) embeds JSON through this. Non-finite floats become ``null`` so the text is valid
    for ``JSON.parse`` as well as a JavaScript literal."""
    try:
        text = json.dumps(value, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(value), allow_nan=False)
    return _SCRIPT_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def csp_hash(script: str) -> str:
    """The Content-Security-Policy source (``'sha256-…'``) that allows exactly this inline
    script text (the characters between ``<script…>`` and ``</script>``) and nothing else."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def inline_script(script: str, attrs: str = "") -> str:
    """A ``<script>`` element for trusted code ortlab wrote (model data goes in through
    :func:`script_json` only). Refuses text the HTML parser would not hand to the script
    whole, so its :func:`csp_hash` is the hash the browser computes."""
    if re.search(r"</script|<!--|\r|\x00", script, flags=re.IGNORECASE):
        raise ValueError(
            "Script text contains '</script', '<!--', CR or NUL: the HTML parser would split "
            "or rewrite it and its CSP hash would not match. Embed data with script_json()."
        )
    return f"<script{attrs}>{script}</script>"


def private_path_patterns() -> list[str]:
    """Folders a shared page must not reveal: ortlab's cache and the user's home directory
    (longest first, so the cache inside the home is named as the cache)."""
    folders = {str(cache_dir()), str(Path.home())}
    return sorted((f for f in folders if f not in ("", "/")), key=len, reverse=True)


def inputs_html(what: str, shapes: str | None, synthetic: bool | None) -> str:
    """One line next to a timing or accuracy figure: whether its inputs were synthetic and the
    shapes it was measured at (``None``: the result does not record it, and the line says so)."""
    kind = {
        True: "synthetic inputs (seeded random values, not your data)",
        False: "inputs you gave",
        None: "inputs (synthetic or given: not recorded in this result)",
    }[synthetic]
    where = f"shapes {esc(shapes, 1000)}" if shapes else "shapes not recorded in this result"
    cls = "ortlab-inputs ortlab-warn" if synthetic else "ortlab-inputs"
    return f'<div class="{cls}">{esc(what)}: measured on {kind} · {where}</div>'


def redact_paths(text: str) -> str:
    """``text`` (plain or HTML-escaped) with ortlab's cache folder shown as ``[ortlab cache]``
    and the home directory as ``~``: a report travels to other people and machines."""
    cache = str(cache_dir())
    for folder in private_path_patterns():
        label = "[ortlab cache]" if folder == cache else "~"  # no markup, no regex escapes
        text = re.sub(re.escape(folder) + r"(?=[/\\\s'\"),;:<&]|$)", label, text)
    return text


# ---------------------------------------------------------------- generic tables

_STYLE = (
    "<style>.ortlab-t{border-collapse:collapse;font-size:12px;margin:4px 0}"
    ".ortlab-t th,.ortlab-t td{padding:2px 8px;text-align:left;border-bottom:1px solid #ddd}"
    ".ortlab-t td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".ortlab-warn{color:#a40;font-weight:600}</style>"
)


def table_html(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    decimals = column_decimals(headers, rows)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{esc(_num(c, d))}</td>' if _is_num(c) else f"<td>{breakable(c)}</td>"
            for c, d in zip(row, decimals, strict=False)
        )
        + "</tr>"
        for row in rows
    )
    return f'<table class="ortlab-t"><tr>{head}</tr>{body}</table>'


_LONG_TOKEN = re.compile(r"[^\s<>&]{24,}")


def breakable(value: object) -> str:
    """``value`` escaped, with a line-break opportunity (``<wbr>``) after each ``_ . / : ,``
    inside tokens of 24 characters or more: a node name such as
    ``/model.22/cv3.2/cv3.2.0/conv/Conv_output_0_nchwc`` wraps at its own separators instead
    of widening its table past the page (and short words are never split)."""
    text = esc(value)
    return _LONG_TOKEN.sub(lambda m: re.sub(r"([_./:,])", r"\1<wbr>", m.group(0)), text)


def table_text(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    decimals = column_decimals(headers, rows)
    cells = [[safe_text(h) for h in headers]] + [
        [
            safe_text(_num(c, d)) if _is_num(c) else safe_text(c, 60)
            for c, d in zip(row, decimals, strict=False)
        ]
        for row in rows
    ]
    numeric = [[False] * len(headers)] + [[_is_num(c) or _is_pct(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for row, nums in zip(cells, numeric, strict=True):
        lines.append(
            "  ".join(
                c.rjust(w) if num else c.ljust(w)
                for c, w, num in zip(row, widths, nums, strict=True)
            ).rstrip()
        )
        if len(lines) == 1:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _is_pct(v: Any) -> bool:
    """Percentages we format ourselves ("12.5%") align like numbers."""
    return isinstance(v, str) and bool(re.fullmatch(r"-?\d+(\.\d+)?%", v))


def column_decimals(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[int]:
    """One format per column, so one unit reads alike down a table (never ``17,701.0`` above
    ``54.000``): microseconds whole (ORT's profiler counts whole µs), else the decimals the
    column's largest value needs for about four significant digits (at most 3)."""
    out = []
    for i, h in enumerate(headers):
        floats = [abs(r[i]) for r in rows if i < len(r) and isinstance(r[i], float)]
        floats = [v for v in floats if math.isfinite(v)]
        if "µs" in h:
            out.append(0)
        elif not floats:
            out.append(3)
        else:
            top = max(floats)
            out.append(1 if top >= 100 else 2 if top >= 1 else 3)
    return out


def _num(v: Any, decimals: int = 3) -> str:
    if isinstance(v, int):
        return f"{v:,}"
    if math.isnan(v):
        return "nan"
    return f"{v:,.{decimals}f}"


# ---------------------------------------------------------------- model summary


def _summary_rows(s: ModelSummary) -> list[tuple[str, str]]:
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in s.opsets.items())
    rows = [
        ("file", f"{s.path} ({fmt_bytes(s.file_bytes)})"),
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
        f"{_STYLE}<div class='ortlab-summary'><b>{esc(s.name)}</b>{problems}"
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


def _report_html(r: SessionReport) -> str:
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
        f"Benchmark {safe_text(b.model)} [{b.session_config.label()}]: {s.count} runs after "
        f"{b.warmup} warm-up, profiling off",
        p50_text(b),
        load_text(b),
        table_text(["stat", "ms"], _stats_rows(b)),
        f"throughput: {s.throughput_per_s:,.1f} runs/s",
        f"feeds: {safe_text(b.feeds, 500)}",
        *report_lines(b.report),
    ]
    return "\n".join(lines)


def benchmark_html(b: BenchmarkResult) -> str:
    s = b.stats
    return (
        f"{_STYLE}<div><b>{esc(b.model)}</b> · {esc(b.session_config.label())} · {s.count} "
        f"runs (+{b.warmup} warm-up) · {s.throughput_per_s:,.1f} runs/s · profiling off</div>"
        f"<div><b>{esc(p50_text(b))}</b></div>"
        f"<div{' class=ortlab-warn' if b.busy else ''}>{esc(load_text(b))}</div>"
        + table_html(["stat", "ms"], _stats_rows(b))
        + f"<div>feeds: {esc(b.feeds, 500)}</div>"
        + _report_html(b.report)
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
        f"{_STYLE}<div><b>{esc(p.model)}</b> · {len(p.data.node)} nodes · "
        f"session init {p.data.session_init_us / 1e3:.1f} ms</div>"
        + _conditions_html(p)
        + table_html(*_op_rows(p))
        + table_html(*profile_node_rows(p, top, fused))
        + (_report_html(p.report) if p.report else "")
        + "".join(f"<div><i>{esc(n, 500)}</i></div>" for n in p.notes[:1])
    )


def _conditions_html(p: ProfileResult) -> str:
    """The profile's conditions line (``ProfileResult.conditions``), in the warning colour when
    the machine was busy."""
    cls = ' class="ortlab-warn"' if p.busy else ""
    return f"<div{cls}>Times: {esc(p.conditions, 600)}</div>"


# ---------------------------------------------------------------- reproducibility


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
        f"{_STYLE}<div><b>{esc(pl.model)}</b> · placement</div>"
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
        + _report_html(pl.report)
    )
