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

import numpy as np

from ortlab.core.cache import cache_dir
from ortlab.core.eps import label as ep_label
from ortlab.core.stats import interval_text
from ortlab.core.units import fmt_bytes

if TYPE_CHECKING:
    from ortlab.analysis.benchmark import BenchmarkResult
    from ortlab.analysis.profiling import ProfileResult
    from ortlab.core.model import ModelSummary
    from ortlab.engine.session import SessionReport

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
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{esc(_num(c))}</td>' if _is_num(c) else f"<td>{esc(c)}</td>"
            for c in row
        )
        + "</tr>"
        for row in rows
    )
    return f'<table class="ortlab-t"><tr>{head}</tr>{body}</table>'


def table_text(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[safe_text(h) for h in headers]] + [
        [safe_text(_num(c)) if _is_num(c) else safe_text(c, 60) for c in row] for row in rows
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


def _num(v: Any) -> str:
    if isinstance(v, int):
        return f"{v:,}"
    if math.isnan(v):
        return "nan"
    if abs(v) >= 100:
        return f"{v:,.1f}"
    return f"{v:.3f}"


# ---------------------------------------------------------------- model summary


def _summary_rows(s: ModelSummary) -> list[tuple[str, str]]:
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in s.opsets.items())
    rows = [
        ("file", f"{s.path} ({fmt_bytes(s.file_bytes)})"),
        ("IR version", str(s.ir_version)),
        ("opsets", opsets),
        ("producer", s.producer or "—"),
        ("nodes", f"{s.node_count:,}" + (
            f" ({s.node_count_total:,} with {s.subgraph_count} control-flow subgraphs)"
            if s.node_count_total != s.node_count else ""
        )),
        ("initializers", f"{s.initializer_count:,} ({fmt_bytes(s.initializer_bytes)}"
         + (f", {fmt_bytes(s.external_data_bytes)} external" if s.external_data_bytes else "")
         + ")"),
    ]  # fmt: skip
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
    slow = [(k, v) for k, v in sorted(r.transformer_ms.items(), key=lambda kv: -kv[1])[:top]
            if v >= 0.5]  # fmt: skip
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
        ("p50", s.p50_ms), ("p90", s.p90_ms), ("p95", s.p95_ms), ("p99", s.p99_ms),
        ("mean", s.mean_ms), ("std", s.std_ms), ("min", s.min_ms), ("max", s.max_ms),
    ]  # fmt: skip


def p50_text(b: BenchmarkResult) -> str:
    """The median run with its interval: "p50 1.93 ms [1.70, 2.10] (96.9 % interval)"."""
    low, high, coverage = b.p50_interval
    if math.isnan(coverage):
        return f"p50 {b.stats.p50_ms:.3f} ms (too few runs for an interval: 6 or more)"
    return (f"p50 {b.stats.p50_ms:.3f} ms [{low:.3f}, {high:.3f}] ({coverage:.1%} interval of "
            "the median run, distribution-free)")  # fmt: skip


def load_text(b: BenchmarkResult) -> str:
    """The machine's load while ``b`` was timed, and what it means for the numbers."""
    if b.other_cores is None:
        return "machine load: not measured"
    cpus = b.environment.get("cpu_count", "?")
    text = f"machine load: other processes used {b.other_cores:.2f} of {cpus} cores"
    if b.busy:
        text += " while this was timed: times are noisier and slower than on an idle machine"
    return text


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
        [kernel_label(r.node, fused.get(r.node, ())), r.op_type, r.provider,
         float(r.us_per_run), f"{r.share:.1%}", float(r.total_us)]
        for r in t.itertuples()
    ]  # fmt: skip
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
    import numpy as np

    med = float(np.median(p.data.run_us)) / 1e3 if p.data.run_us else float("nan")
    parts = [
        f"Profile {safe_text(p.model)}: {len(p.data.node)} nodes, {p.runs} runs, median run "
        f"{med:.3f} ms (profiling on), session init {p.data.session_init_us / 1e3:.1f} ms",
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
        f"{_STYLE}<div><b>{esc(p.model)}</b> · {len(p.data.node)} nodes · {p.runs} runs · "
        f"session init {p.data.session_init_us / 1e3:.1f} ms</div>"
        + table_html(*_op_rows(p))
        + table_html(*profile_node_rows(p, top, fused))
        + (_report_html(p.report) if p.report else "")
        + "".join(f"<div><i>{esc(n, 500)}</i></div>" for n in p.notes[:1])
    )


# ---------------------------------------------------------------- reproducibility


# ---------------------------------------------------------------- placement


def _placement_summary_rows(pl: Any) -> tuple[list[str], list[list[Any]]]:
    headers = ["provider", "nodes", "node share", "partitions", "µs/run (median run)",
               "time share", "outputs/run"]  # fmt: skip
    rows = [
        [r.provider, int(r.nodes), f"{r.node_share:.0%}", int(r.partitions),
         float(r.us_per_run), f"{r.time_share:.0%}", fmt_bytes(r.output_bytes)]
        for r in pl.summary().itertuples()
    ]  # fmt: skip
    return headers, rows


def _partition_rows(pl: Any, limit: int = 30) -> tuple[list[str], list[list[Any]]]:
    headers = ["#", "provider", "original nodes", "inputs", "outputs", "µs/run (median run)"]
    rows = [
        [p.partition, p.provider + (" (compiled)" if p.compiled else ""), len(p.original_nodes),
         ", ".join(p.inputs[:4]) + (" …" if len(p.inputs) > 4 else ""),
         ", ".join(p.outputs[:4]) + (" …" if len(p.outputs) > 4 else ""), float(p.us_per_run)]
        for p in pl.partition_rows[:limit]
    ]  # fmt: skip
    return headers, rows


def _boundary_rows(pl: Any, limit: int = 30) -> tuple[list[str], list[list[Any]]]:
    headers = ["tensor", "from", "to", "bytes"]
    rows = [
        [b.tensor, f"{b.producer} ({b.producer_provider.removesuffix('ExecutionProvider')})",
         f"{b.consumer} ({b.consumer_provider.removesuffix('ExecutionProvider')})", b.bytes]
        for b in pl.boundary_rows[:limit]
    ]  # fmt: skip
    return headers, rows


def _placement_reason_rows(pl: Any, limit: int = 12) -> tuple[list[str], list[list[Any]]]:
    headers = ["why", "nodes", "e.g.", "fix"]
    rows = [[r.reason, int(r.nodes), r.examples, r.fix]
            for r in pl.reasons().head(limit).itertuples()]  # fmt: skip
    return headers, rows


def _why_title(pl: Any) -> str:
    return f"Why nodes are not on {pl.wanted.removesuffix('ExecutionProvider')}"


def placement_text(pl: Any) -> str:
    parts = [
        f"Placement of {safe_text(pl.model)} ({pl.runs} profiled runs; final graph from "
        f"{pl.final_source}); times are each node's median run with the profiler on, which "
        "adds ~5 µs per node: take latency from ortlab.benchmark",
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
        f"{_STYLE}<div><b>{esc(pl.model)}</b> · placement · {pl.runs} profiled runs · times: "
        "each node's median run, profiler on (~5 µs per node more than a plain run; latency "
        "is in the Benchmark)</div>"
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


# ---------------------------------------------------------------- optimization


def _opt_rows(o: Any) -> tuple[list[str], list[list[Any]]]:
    lat = {r.level: r for r in o.latency_rows}
    headers = ["level", "nodes", "fusions", "p50 ms", "vs first level", "verdict"]
    rows = []
    for lv in o.levels:
        r = lat.get(lv.level)
        fusions = sum(1 for g in lv.groups if g.kind == "fused")
        rows.append([
            lv.level, lv.nodes, fusions,
            float(r.p50_ms) if r else "—",
            interval_text(r.ratio, r.low, r.high) if r else "—",
            _short_verdict(r.verdict) if r else "not timed",
        ])  # fmt: skip
    return headers, rows


def _short_verdict(text: str) -> str:
    """'all is 1.52x faster than disabled: time ratio …' -> the part before the colon."""
    return text.split(":", maxsplit=1)[0]


def optimization_text(o: Any) -> str:
    parts = [
        f"Graph optimization of {safe_text(o.model)}: {o.original_nodes} original nodes",
        table_text(*_opt_rows(o)),
    ]
    for lv in o.levels:
        if lv.fired:
            parts.append(f"{lv.level}: fired " + ", ".join(f"{k}" for k in lv.fired))
    parts += [f"BLOCKER: {safe_text(b, 2000)}" for b in o.blockers]
    return "\n".join(parts)


def optimization_html(o: Any) -> str:
    blockers = "".join(f'<div class="ortlab-warn">⚠ {esc(b, 2000)}</div>' for b in o.blockers)
    fired = "".join(
        f"<div><b>{esc(lv.level)}</b>: {esc(', '.join(lv.fired), 2000)}</div>"
        for lv in o.levels
        if lv.fired
    )
    return (
        f"{_STYLE}<div><b>{esc(o.model)}</b> · {o.original_nodes} original nodes</div>"
        + blockers
        + table_html(*_opt_rows(o))
        + fired
    )


# ---------------------------------------------------------------- quantization comparison


def _compare_rows(c: Any) -> tuple[list[str], list[list[Any]]]:
    headers = ["variant", "MB", "size", "p50 ms", "time vs original", "cosine", "SQNR dB", "top-1",
               "labels equal", "quantized kernels"]  # fmt: skip
    rows = []
    for r in c.to_pandas().itertuples():
        labels = r.labels_equal
        rows.append([
            r.variant, float(r.file_mb), f"{r.size_ratio:.2f}x", float(r.p50_ms),
            interval_text(r.ratio, r.ci_low, r.ci_high, 2),
            "—" if r.cosine is None else f"{r.cosine:.5f}",
            "—" if r.sqnr_db is None else f"{r.sqnr_db:.1f}",
            "—" if r.top1 is None or r.top1 != r.top1 else f"{r.top1:.0%}",
            "—" if labels is None or np.isnan(labels) else f"{labels:.1%}",
            r.quantized_kernels or "none",
        ])  # fmt: skip
    return headers, rows


METRICS_LEGEND = (
    "cosine: how well the variant's output points the same way as the original's (1 = "
    "identical direction; the doctor asks ≥ 0.999) — blind to scale. SQNR dB: signal over error "
    "energy, 10·log10(‖original‖² / ‖original − variant‖²): 20 dB is an error 10 % the size of "
    "the output, 40 dB 1 %, 0 dB as large as the output. A high cosine beside a low SQNR means "
    "the direction survived but the scale did not. top-1: share of samples whose highest score "
    "is the same class (outputs shaped [batch, classes], 2 classes or more); — where the output "
    "is not class scores. labels equal: integer outputs compared exactly. All on the first "
    "float output, over the evaluation samples."
)
"""What the comparison's accuracy columns mean and when they do not apply (one text: the
table, the report and the CLI)."""


def compare_text(c: Any) -> str:
    mark = "  ACCURACY FROM SYNTHETIC INPUTS (random data): " if c.synthetic else "  "
    parts = [
        f"Variants of {safe_text(c.model)}; errors on {safe_text(c.eval_data)}",
        table_text(*_compare_rows(c)),
        mark + "time ratios are paired over interleaved rounds, 95 % CI in brackets",
        "  " + METRICS_LEGEND,
    ]
    parts += [f"  {r.variant}: {r.verdict}" for r in c.rows[1:]]
    parts += [f"  note: {n}" for n in c.notes]
    parts += [f"WHY {s.variant}: {s.signal} — {s.evidence}. Fix: {s.fix}" for s in c.signals]
    return "\n".join(safe_text(p, 5000) for p in parts)


def compare_html(c: Any) -> str:
    warn = (
        '<div class="ortlab-warn">Accuracy figures come from synthetic (random) inputs.</div>'
        if c.synthetic
        else ""
    )
    signals = "".join(
        f"<li><b>{esc(s.variant)}</b>: {esc(s.signal)} — {esc(s.evidence, 1000)}. "
        f"<i>Fix:</i> {esc(s.fix, 1000)}</li>"
        for s in c.signals
    )
    notes = "".join(f"<li>{esc(n, 1000)}</li>" for n in c.notes)
    return (
        f"{_STYLE}<div><b>{esc(c.model)}</b> · variants · errors on {esc(c.eval_data)}</div>"
        + warn
        + table_html(*_compare_rows(c))
        + f"<div style='font-size:11px;color:#555;max-width:900px'>{esc(METRICS_LEGEND)}</div>"
        + (f"<ul>{signals}</ul>" if signals else "")
        + (f"<details><summary>notes</summary><ul>{notes}</ul></details>" if notes else "")
    )


# ---------------------------------------------------------------- the other result types


def session_report_text(r: SessionReport) -> str:
    return "\n".join([repr(r), *(f"  {line}" for line in report_lines(r))])


def session_report_html(r: SessionReport) -> str:
    return _report_html(r)


def config_comparison_text(c: Any) -> str:
    rows = [[r.label, r.p50_ms, interval_text(r.ratio, r.low, r.high), r.verdict]
            for r in c.rows]  # fmt: skip
    return f"{safe_text(c.model)}\n" + table_text(["config", "p50 ms", "ratio", "verdict"], rows)


def config_comparison_html(c: Any) -> str:
    rows = [[r.label, r.p50_ms, interval_text(r.ratio, r.low, r.high), r.verdict]
            for r in c.rows]  # fmt: skip
    return f"<b>{esc(c.model)}</b>" + table_html(["config", "p50 ms", "ratio", "verdict"], rows)


def _diff_rows(d: Any, top: int = 20) -> tuple[list[str], list[list[Any]]]:
    headers = ["node", "op", "A µs", "B µs", "B − A µs [interval]", "verdict", "vs run", "EP",
               "kernel"]  # fmt: skip
    t = d.to_pandas()
    t = t[t["verdict"].isin(["slower", "faster"]) | t["moved"] | t["kernel_changed"]]
    rows = [
        [r.node, r.op_type, f"{r.a_us:.1f}", f"{r.b_us:.1f}",
         interval_text(r.delta_us, r.low, r.high, 1, "+"), r.verdict,
         "—" if r.vs_run != r.vs_run else f"x{r.vs_run:.2f}",
         f"{ep_label(r.a_provider)} → {ep_label(r.b_provider)}" if r.moved else "",
         f"{r.a_kernel} → {r.b_kernel}" if r.kernel_changed else ""]
        for r in t.head(top).itertuples()
    ]  # fmt: skip
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
    return "\n".join([safe_text(_diff_head(d), 800), table_text(*_diff_rows(d, top)),
                      *d.notes])  # fmt: skip


def diff_html(d: Any, top: int = 20) -> str:
    return (
        f"{_STYLE}<div><b>{esc(_diff_head(d), 800)}</b></div>"
        + table_html(*_diff_rows(d, top))
        + "".join(f"<div><i>{esc(n, 400)}</i></div>" for n in d.notes)
    )


def _ablation_rows(a: Any) -> tuple[list[str], list[list[Any]]]:
    headers = ["switched off", "fired", "nodes (Δ)", "create ms", "its own ms", "p50 ms",
               "ratio [interval]", "verdict", "max |Δ output|"]  # fmt: skip
    rows = [
        [r.off or "(none: baseline)", r.fired if r.off else "—", f"{r.nodes} ({r.node_change:+d})",
         f"{r.create_ms:.0f}", "—" if r.own_ms != r.own_ms else f"{r.own_ms:.1f}", r.p50_ms,
         "—" if not r.off else interval_text(r.ratio, r.low, r.high),
         "—" if not r.off else r.verdict, f"{r.max_abs:.3g}"]
        for r in a.rows
    ]  # fmt: skip
    return headers, rows


def ablation_text(a: Any) -> str:
    head = (f"{safe_text(a.model)}: graph transformers switched off one at a time at level "
            f"{a.level} ({a.rounds} interleaved rounds)")  # fmt: skip
    return "\n".join([head, table_text(*_ablation_rows(a)), *a.notes])


def ablation_html(a: Any) -> str:
    return (
        f"{_STYLE}<div><b>{esc(a.model)}</b> · one transformer off at a time · level "
        f"{esc(a.level)} · {a.rounds} interleaved rounds</div>"
        + table_html(*_ablation_rows(a))
        + "".join(f"<div><i>{esc(n, 400)}</i></div>" for n in a.notes)
        + inputs_html("Timed and compared", a.feeds, a.synthetic)
    )


def _footprint_rows(r: Any) -> tuple[list[str], list[list[Any]]]:
    headers = ["setting", "peak", "held after runs", "create ms", "against the reference"]
    rows = [[row.setting, fmt_bytes(row.peak), fmt_bytes(row.held),
             f"{float(np.median(row.create_ms)):.0f}" if row.create_ms else "—", row.verdict()]
            for row in r.rows]  # fmt: skip
    return headers, rows


def _footprint_head(r: Any) -> str:
    return (f"{r.model}: resident memory the session adds ({fmt_bytes(r.weights_bytes)} of "
            f"weights), {r.repeats} fresh processes per setting, {r.runs} runs each")  # fmt: skip


def footprint_text(r: Any) -> str:
    return "\n".join([safe_text(_footprint_head(r)), table_text(*_footprint_rows(r)), *r.notes])


def footprint_html(r: Any) -> str:
    return (
        f"{_STYLE}<div><b>{esc(_footprint_head(r), 400)}</b></div>"
        + table_html(*_footprint_rows(r))
        + "".join(f"<div><i>{esc(n, 400)}</i></div>" for n in r.notes)
        + inputs_html("Run with", r.feeds, r.synthetic)
    )


def transformer_text(t: Any) -> str:
    lines = [repr(t)]
    lines += [f"  {k}: {v}" for k, v in t.found.items()]
    if t.reason:
        lines.append(f"  why attention did not fuse: {t.reason}")
    return "\n".join(lines)


def transformer_html(t: Any) -> str:
    return f"<pre>{esc(transformer_text(t), 20000)}</pre>"


def _error_rows(e: Any, n: int) -> tuple[list[str], list[list[Any]]]:
    worst = sorted(e.tensors, key=lambda t: t.sqnr_db)[:n]
    head = ["tensor", "node", "op", "SQNR dB", "cosine", "max |err|"]
    return head, [[t.tensor, t.node, t.op_type, t.sqnr_db, t.cosine, t.max_abs] for t in worst]


def error_text(e: Any, top: int = 15) -> str:
    head, rows = _error_rows(e, top)
    mark = " (SYNTHETIC inputs)" if e.synthetic else ""
    return (f"{safe_text(e.model)} vs {safe_text(e.variant)}: {len(e.tensors)} tensors on "
            f"{safe_text(e.samples)}{mark}; worst first\n" + table_text(head, rows))  # fmt: skip


def error_html(e: Any, top: int = 15) -> str:
    head, rows = _error_rows(e, top)
    mark = " <b>(synthetic inputs)</b>" if e.synthetic else ""
    return (f"<b>{esc(e.model)}</b> vs <b>{esc(e.variant)}</b>: {len(e.tensors)} tensors on "
            f"{esc(e.samples)}{mark}; worst first" + table_html(head, rows))  # fmt: skip


# ---------------------------------------------------------------- what-if


def _whatif_rows(w: Any) -> tuple[list[str], list[list[Any]]]:
    headers = ["target", "evidence", "on target", "on CPU", "removed", "partitions", "seconds"]
    rows = []
    for t in w.summary().itertuples():
        predicted = t.evidence in ("compiled", "rules", "measured")
        rows.append([
            t.target, t.evidence, int(t.on_target) if predicted else "-",
            int(t.on_cpu) if predicted else "-", int(t.removed) if predicted else "-",
            int(t.partitions) if predicted else "-", round(float(t.seconds), 2),
        ])  # fmt: skip
        if t.before >= 0:
            rows[-1][2] = f"{t.before} → {int(t.on_target)}" if predicted else "-"
    return headers, rows


def _whatif_reason_rows(w: Any, limit: int = 20) -> tuple[list[str], list[list[Any]]]:
    r = w.reasons()
    rows = [
        [x.target, x.reason, int(x.nodes), x.examples, x.fix] for x in r.head(limit).itertuples()
    ]
    return ["target", "reason", "nodes", "examples", "fix"], rows


def _whatif_target_notes(w: Any) -> list[str]:
    return [f"{t.target}: {t.reason}" for t in w.targets if t.evidence in ("unknown", "failed")]


def whatif_text(w: Any, top: int = 20) -> str:
    before = " (on target: before → after fixing the shapes)" if w.before else ""
    parts = [
        f"What-if for {safe_text(w.model)} at {safe_text(w.feeds, 300)}{before}",
        table_text(*_whatif_rows(w)),
        "",
        "Why nodes fall back:",
        table_text(*_whatif_reason_rows(w, top)),
        "",
        *(safe_text(n, 600) for n in _whatif_target_notes(w)),
        *(safe_text(n, 600) for n in w.notes),
    ]
    return "\n".join(parts)


def whatif_html(w: Any, top: int = 20) -> str:
    notes = "".join(f"<div>{esc(n, 600)}</div>" for n in [*_whatif_target_notes(w), *w.notes])
    before = " · on target: before → after fixing the shapes" if w.before else ""
    return (
        f"{_STYLE}<div><b>{esc(w.model)}</b> · what-if (predicted, not measured) at "
        f"{esc(w.feeds, 300)}{before}</div>"
        + table_html(*_whatif_rows(w))
        + "<div><b>Why nodes fall back</b></div>"
        + table_html(*_whatif_reason_rows(w, top))
        + notes
    )
