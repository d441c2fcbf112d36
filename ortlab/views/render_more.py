"""Renderers of the analyses beyond the first screen: optimization levels, the quantization
comparison, config comparisons, run diffs, ablation, memory footprints, transformer fusion,
quantization error, what-if, and the providers onnxruntime has here. Pure functions, no UI
library; model strings through :func:`~ortlab.views.html.esc` and
:func:`~ortlab.views.html.safe_text`, as in :mod:`ortlab.views.render`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ortlab.core.eps import label as ep_label
from ortlab.core.machine import BUSY_CORES, load_sentence
from ortlab.core.stats import interval_text
from ortlab.core.units import fmt_bytes, fmt_us
from ortlab.views.html import STYLE, esc, inputs_html, safe_text, table_html, table_text

if TYPE_CHECKING:
    from ortlab.core.runtime import Providers


# ---------------------------------------------------------------- optimization


def _opt_rows(o: Any) -> tuple[list[str], list[list[Any]]]:
    lat = {r.level: r for r in o.latency_rows}
    headers = ["level", "nodes", "fusions", "p50 ms", "vs first level", "verdict"]
    rows = []
    for lv in o.levels:
        r = lat.get(lv.level)
        fusions = sum(1 for g in lv.groups if g.kind == "fused")
        rows.append(
            [
                lv.level,
                lv.nodes,
                fusions,
                float(r.p50_ms) if r else "—",
                interval_text(r.paired.ratio, r.paired.low, r.paired.high) if r else "—",
                _short_verdict(r.paired.verdict) if r else "not timed",
            ]
        )
    return headers, rows


def _short_verdict(text: str) -> str:
    """'all is 1.52x faster than disabled: time ratio …' -> the part before the colon; 'basic
    vs disabled: no measurable difference, …' -> 'no measurable difference' (the verdict, not
    the names the row already shows)."""
    head, _, rest = text.partition(":")
    if " vs " in head and rest:
        return rest.strip().split(",", maxsplit=1)[0].split(" (", maxsplit=1)[0]
    return head


def optimization_text(o: Any) -> str:
    parts = [
        f"Graph optimization of {safe_text(o.model)}: {o.original_nodes} original nodes",
        table_text(*_opt_rows(o)),
    ]
    for lv in o.levels:
        if lv.fired:
            parts.append(f"{lv.level}: fired " + ", ".join(f"{k}" for k in lv.fired))
    parts += [f"BLOCKER: {safe_text(b, 2000)}" for b in o.blockers]
    if o.latency_rows:
        parts.append(load_sentence(o.other_cores))
    return "\n".join(parts)


def optimization_html(o: Any) -> str:
    blockers = "".join(f'<div class="ortlab-warn">⚠ {esc(b, 2000)}</div>' for b in o.blockers)
    fired = "".join(
        f"<div><b>{esc(lv.level)}</b>: {esc(', '.join(lv.fired), 2000)}</div>"
        for lv in o.levels
        if lv.fired
    )
    return (
        f"{STYLE}<div><b>{esc(o.model)}</b> · {o.original_nodes} original nodes</div>"
        + blockers
        + table_html(*_opt_rows(o))
        + fired
        + (_load_html(o.other_cores) if o.latency_rows else "")
    )


# ---------------------------------------------------------------- quantization comparison


def _compare_rows(c: Any) -> tuple[list[str], list[list[Any]]]:
    headers = [
        "variant",
        "MB",
        "size",
        "p50 ms",
        "time vs original",
        "cosine",
        "SQNR dB",
        "top-1",
        "labels equal",
        "quantized kernels",
    ]
    rows = []
    for r in c.to_pandas().itertuples():
        labels = r.labels_equal
        rows.append(
            [
                r.variant,
                float(r.file_mb),
                f"{r.size_ratio:.2f}x",
                float(r.p50_ms),
                interval_text(r.ratio, r.ci_low, r.ci_high, 2),
                "—" if r.cosine is None else f"{r.cosine:.5f}",
                "—" if r.sqnr_db is None else f"{r.sqnr_db:.1f}",
                "—" if r.top1 is None or r.top1 != r.top1 else f"{r.top1:.0%}",
                "—" if labels is None or np.isnan(labels) else f"{labels:.1%}",
                r.quantized_kernels or "none",
            ]
        )
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
    parts += [f"  {r.variant}: {r.paired.verdict}" for r in c.rows[1:]]
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
        f"{STYLE}<div><b>{esc(c.model)}</b> · variants · errors on {esc(c.eval_data)}</div>"
        + warn
        + table_html(*_compare_rows(c))
        + f"<div style='font-size:11px;color:#555;max-width:900px'>{esc(METRICS_LEGEND)}</div>"
        + (f"<ul>{signals}</ul>" if signals else "")
        + (f"<details><summary>notes</summary><ul>{notes}</ul></details>" if notes else "")
    )


# ---------------------------------------------------------------- the other result types


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
        + _load_html(c.other_cores)
        + "".join(f"<div><i>{esc(n, 600)}</i></div>" for n in c.notes)
    )


def _load_html(other: float | None) -> str:
    """The load sentence (``core.machine.load_sentence``), in the warning colour when busy."""
    cls = ' class="ortlab-warn"' if other is not None and other > BUSY_CORES else ""
    return f"<div{cls}>{esc(load_sentence(other))}</div>"


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


def _ablation_rows(a: Any) -> tuple[list[str], list[list[Any]]]:
    headers = [
        "switched off",
        "fired",
        "nodes (Δ)",
        "create ms",
        "its own ms",
        "p50 ms",
        "ratio [interval]",
        "verdict",
        "max |Δ output|",
    ]
    rows = [
        [
            r.off or "(none: baseline)",
            r.fired if r.off else "—",
            f"{r.nodes} ({r.node_change:+d})",
            f"{r.create_ms:.0f}",
            "—" if r.own_ms != r.own_ms else f"{r.own_ms:.1f}",
            r.p50_ms,
            "—" if not r.off else interval_text(r.paired.ratio, r.paired.low, r.paired.high),
            "—" if not r.off else r.paired.verdict,
            f"{r.max_abs:.3g}",
        ]
        for r in a.rows
    ]
    return headers, rows


def ablation_text(a: Any) -> str:
    head = (
        f"{safe_text(a.model)}: graph transformers switched off one at a time at level "
        f"{a.level} ({a.rounds} interleaved rounds)"
    )
    return "\n".join([head, table_text(*_ablation_rows(a)), *a.notes])


def ablation_html(a: Any) -> str:
    return (
        f"{STYLE}<div><b>{esc(a.model)}</b> · one transformer off at a time · level "
        f"{esc(a.level)} · {a.rounds} interleaved rounds</div>"
        + table_html(*_ablation_rows(a))
        + "".join(f"<div><i>{esc(n, 400)}</i></div>" for n in a.notes)
        + inputs_html("Timed and compared", a.feeds, a.synthetic)
    )


def _footprint_rows(r: Any) -> tuple[list[str], list[list[Any]]]:
    headers = ["setting", "peak", "held after runs", "create ms", "against the reference"]
    rows = [
        [
            row.setting,
            fmt_bytes(row.peak),
            fmt_bytes(row.held),
            f"{float(np.median(row.create_ms)):.0f}" if row.create_ms else "—",
            row.verdict(),
        ]
        for row in r.rows
    ]
    return headers, rows


def _footprint_head(r: Any) -> str:
    return (
        f"{r.model}: resident memory the session adds ({fmt_bytes(r.weights_bytes)} of "
        f"weights), {r.repeats} fresh processes per setting, {r.runs} runs each"
    )


def footprint_text(r: Any) -> str:
    return "\n".join([safe_text(_footprint_head(r)), table_text(*_footprint_rows(r)), *r.notes])


def footprint_html(r: Any) -> str:
    return (
        f"{STYLE}<div><b>{esc(_footprint_head(r), 400)}</b></div>"
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
    notes = "".join(f"\nnote: {safe_text(n, 400)}" for n in e.notes)
    return (
        f"{safe_text(e.model)} vs {safe_text(e.variant)}: {len(e.tensors)} tensors on "
        f"{safe_text(e.samples)}{mark}; worst first\n" + table_text(head, rows) + notes
    )


def error_html(e: Any, top: int = 15) -> str:
    head, rows = _error_rows(e, top)
    mark = " <b>(synthetic inputs)</b>" if e.synthetic else ""
    return (
        f"<b>{esc(e.model)}</b> vs <b>{esc(e.variant)}</b>: {len(e.tensors)} tensors on "
        f"{esc(e.samples)}{mark}; worst first"
        + table_html(head, rows)
        + "".join(f"<div><i>{esc(n, 400)}</i></div>" for n in e.notes)
    )


# ---------------------------------------------------------------- what-if


def _whatif_rows(w: Any) -> tuple[list[str], list[list[Any]]]:
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
        f"{STYLE}<div><b>{esc(w.model)}</b> · what-if (predicted, not measured) at "
        f"{esc(w.feeds, 300)}{before}</div>"
        + table_html(*_whatif_rows(w))
        + "<div><b>Why nodes fall back</b></div>"
        + table_html(*_whatif_reason_rows(w, top))
        + notes
    )


# ---------------------------------------------------------------- providers


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
