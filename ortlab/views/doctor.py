"""The doctor's room: its findings, measured gains, best verified configuration and candidates
as terminal text and HTML, its figures (candidates, threads, Pareto), and the best
configuration as plain-onnxruntime code (:func:`best_snippet`, which the report shows too).
Pure functions, no UI library; every model string through :func:`~ortlab.views.html.esc` or
:func:`~ortlab.views.html.safe_text`; plotly imported inside the figure."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from ortlab.core.machine import IDLE_WINDOW_S
from ortlab.core.stats import NOISE_BAND, interval_text
from ortlab.core.units import fmt_ms
from ortlab.diagnosis.best import Best
from ortlab.views.colors import VERDICT_COLORS
from ortlab.views.figure import layout
from ortlab.views.html import STYLE, esc, safe_text, table_html, table_text
from ortlab.views.memory import footprint_html

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.diagnosis.doctor import DoctorResult
    from ortlab.diagnosis.facts import CpuCosts
    from ortlab.diagnosis.generationfacts import GenerationFacts

__all__ = [
    "best_snippet",
    "best_text",
    "best_verdict",
    "doctor_figure",
    "doctor_html",
    "doctor_text",
]


GENERATION_HEAD = ["candidate", "decode tokens/s: baseline → it", "decode time ratio [CI]"]
GENERATION_HEAD += ["TTFT ms: baseline → it", "TTFT ratio [CI]", "greedy tokens kept"]
GENERATION_HEAD += ["KLD mean / p99 (nats), top-1"]


def _generation_rows(d: DoctorResult) -> list[list[str]]:
    """A decoder's candidates measured in generation, each beside the baseline rounds it was
    interleaved with (one measurement: the pair's)."""
    gen = d.generation
    if gen is None:
        return []
    return [
        [
            t.label,
            f"{t.base_decode_tokens_per_s:.0f} → {t.decode_tokens_per_s:.0f}",
            interval_text(t.decode.ratio, t.decode.low, t.decode.high),
            f"{t.base_ttft_ms:.3f} → {t.ttft_ms:.3f}",
            interval_text(t.ttft.ratio, t.ttft.low, t.ttft.high),
            f"{t.tokens_kept} of {t.tokens}",
            f"{t.quality.mean:.4f} / {t.quality.p99:.4f}, {t.quality.top1:.1%}"
            if t.quality is not None
            else "— (same model)",
        ]
        for t in gen.trials
    ]


def _generation_caption(gen: GenerationFacts) -> str:
    return (
        f"Measured in generation ({gen.prompt}-token prompt, {gen.new_tokens} new tokens, "
        f"{gen.rounds} rounds interleaved with the baseline; ratios < 1 are faster):"
    )


CPU_HEAD = ["candidate", "CPU ms per run", "cores while running", "idle cores after runs"]
CPU_HEAD += ["CPU ratio [CI]", "CPU verdict"]


def _cpu_rows(d: DoctorResult) -> list[list[str]]:
    """Each candidate's CPU cost beside the baseline's (one CPU stage: the same rounds)."""
    if d.cpu is None:
        return []
    return [
        [
            r.label,
            f"{r.cpu_ms:.3f}",
            f"{r.cores:.2f}",
            f"{r.idle_cores:.2f}",
            "—"
            if r.key == "baseline"
            else interval_text(r.paired.ratio, r.paired.low, r.paired.high),
            r.paired.verdict.split(":")[0],
        ]
        for r in d.cpu.rows.values()
    ]


def _cpu_caption(cpu: CpuCosts) -> str:
    return (
        f"CPU cost ({cpu.rounds} rounds of {cpu.runs} runs per candidate; CPU over every "
        f"thread of the session's process; idle: the {IDLE_WINDOW_S:g} s after its runs, "
        "nothing running; ratios < 1 use less CPU):"
    )


def doctor_text(d: DoctorResult) -> str:
    lines = [
        f"Doctor: {safe_text(d.model)} — {len(d.findings)} findings, baseline p50 "
        f"{fmt_ms(d.baseline_ms)}, {len(d.measured)} candidates measured in "
        f"{d.elapsed_s:.0f} s ({d.rounds} rounds x {d.runs} runs, interleaved)"
    ]
    for i, f in enumerate(d.findings, 1):
        lines += [
            f"{i}. [{f.severity}] {safe_text(f.title, 300)}",
            f"   evidence: {safe_text(f.evidence, 2000)}",
            f"   fix: {safe_text(f.fix, 2000)}",
            f"   gain: {safe_text(f.gain, 500)}",
            f"   code: {safe_text(f.code, 500)}",
        ]
    best = d.best
    chosen = " (for CPU per run)" if best.objective == "cpu" else ""
    lines.append(f"BEST{chosen}: {best_text(best)}")
    if d.generation is not None:
        lines += [
            _generation_caption(d.generation),
            table_text(GENERATION_HEAD, _generation_rows(d)),
        ]
    if d.cpu is not None and _cpu_rows(d):
        lines += [_cpu_caption(d.cpu), table_text(CPU_HEAD, _cpu_rows(d))]
    if d.stages:
        lines.append("time: " + ", ".join(f"{k} {v:.1f} s" for k, v in d.stages.items()))
    lines += [f"note: {safe_text(n, 2000)}" for n in d.notes]
    return "\n".join(lines)


def doctor_html(d: DoctorResult, model_file: str | None = None) -> str:
    """The doctor's findings, best and candidates. With ``model_file`` (the report) the best's
    snippet loads that file name instead of the path on the measuring machine."""
    items = (
        "".join(
            f"<li><b>[{esc(f.severity)}] {esc(f.title, 300)}</b>"
            f"<div>Evidence: {esc(f.evidence, 2000)}</div><div>Fix: {esc(f.fix, 2000)}</div>"
            f"<div>Measured: <b>{esc(f.gain, 500)}</b></div>"
            f"<pre style='margin:2px 0;background:#f6f6f6'>{esc(f.code, 1000)}</pre></li>"
            for f in d.findings
        )
        or "<li>No findings: nothing the doctor checks for is wrong with this session.</li>"
    )
    cand = [
        [
            m.key,
            m.label,
            m.p50_ms,
            interval_text(m.paired.ratio, m.paired.low, m.paired.high),
            "—" if m.cosine != m.cosine else f"{m.cosine:.5f}",
            m.stage,
        ]
        for m in d.measured
    ]
    notes = "".join(f"<div><i>{esc(n, 2000)}</i></div>" for n in d.notes)
    snippet = best_snippet(d.best, model_file)
    return (
        f"{STYLE}<div class='ortlab-doctor'><div><b>{esc(d.model)}</b> · baseline p50 "
        f"{fmt_ms(d.baseline_ms)} · {len(d.measured)} candidates in {d.elapsed_s:.0f} s "
        f"({d.rounds} rounds × {d.runs} runs, interleaved)</div><ol>{items}</ol>"
        f"<div><b>Best verified{' for CPU per run' if d.best.objective == 'cpu' else ''}</b>: "
        f"{esc(d.best.variant)} · "
        f"{esc(d.best.config.label())} — {esc(best_verdict(d.best), 800)}</div>"
        f"<pre style='background:#f6f6f6'>{esc(snippet, 5000)}</pre>"
        + table_html(["key", "candidate", "p50 ms", "ratio [95% CI]", "cosine", "stage"], cand)
        + (
            f"<div><b>{esc(_generation_caption(d.generation))}</b></div>"
            + table_html(GENERATION_HEAD, _generation_rows(d))
            if d.generation is not None
            else ""
        )
        + (
            f"<div><b>{esc(_cpu_caption(d.cpu))}</b></div>" + table_html(CPU_HEAD, _cpu_rows(d))
            if d.cpu is not None and _cpu_rows(d)
            else ""
        )
        + (f"<div><b>Memory</b></div>{footprint_html(d.memory)}" if d.memory else "")
        + notes
        + "</div>"
    )


def best_verdict(best: Best) -> str:
    """THE sentence for the best's verdict, composed from its measurements: a decoder's
    generation first (one decode step's ratio as evidence after it), the latency beside a
    CPU verdict, and the caveat of a busy machine."""
    said = best.paired.verdict
    if best.generation is not None:
        said = (
            f"in generation: {best.generation.verdict}; on one decode step (the timed "
            f"inputs): {said}"
        )
    if best.latency is not None:
        said += f"; latency: {best.latency.verdict}"
    return f"{said}; {best.caveat}" if best.caveat else said


def best_text(best: Best) -> str:
    """'variant · config — verdict' in one line (``repr`` and the doctor's text)."""
    return f"{best.variant} · {best.config.label()} — {best_verdict(best)}"


def best_snippet(best: Best, model_file: str | None = None) -> str:
    """The best configuration as plain onnxruntime loading ``model_file`` (a name the reader
    knows; default the file the doctor measured); a model variant gets its own file name and
    a comment saying how to rebuild it."""
    head = [f"# ortlab doctor: {best.title()} ({best_verdict(best)})"]
    path: str = model_file or best.model_path
    if best.variant != "original" and model_file is None:
        head.append(f"# model variant {best.variant!r}, made by: " + "; ".join(best.steps))
    elif best.variant != "original":
        path = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(best.variant)).strip("._") + ".onnx"
        head.append(
            f"# {path}: the model variant {best.variant!r} of {model_file} (it stays in "
            f"ortlab's cache on the machine that measured it); rebuild it from "
            f"{model_file} with:"
        )
        head += [f"#   {step}" for step in best.steps] or ["#   (steps not recorded)"]
    return "\n".join(head) + "\n" + str(best.config.snippet(path))


def doctor_figure(d: DoctorResult, kind: str = "candidates") -> go.Figure:
    """'candidates': time ratio to the baseline with its interval (>= 95 %) per candidate;
    'threads': the intra-op threads / spinning sweep; 'pareto': time vs output error, marker
    area = size."""
    import plotly.graph_objects as go

    if kind not in ("candidates", "threads", "pareto"):
        raise ValueError(f"Unknown doctor plot {kind!r}; choose candidates, threads or pareto.")
    t = d.candidates() if kind != "threads" else d.threads()
    t = t[t["key"] != "baseline"] if kind != "threads" else t
    labels = [
        esc(f"{k} ({s})" if kind == "candidates" else k)
        for k, s in zip(t["key"], t.get("stage", t["key"]), strict=True)
    ]
    if kind == "pareto":
        err = [max(1 - (1.0 if np.isnan(c) else c), 1e-9) for c in t["cosine"]]
        fig = go.Figure(
            go.Scatter(
                x=t["ratio"],
                y=err,
                mode="markers+text",
                text=labels,
                textposition="top center",
                marker={
                    "size": [8 + 3 * np.sqrt(mb) for mb in t["file_mb"]],
                    "color": ["#E45756" if p else "#4C78A8" for p in t["pareto"]],
                },
                hovertemplate="%{text}<br>time ×%{x:.3f}<br>1 - cosine %{y:.2e}<extra></extra>",
            )
        )
        fig.add_vline(x=1.0, line_dash="dot")
        return layout(
            fig,
            f"{esc(d.model)}: time vs output error (red: Pareto set)",
            xaxis_title="time ratio to baseline (< 1 is faster)",
            yaxis_title="1 - cosine (log)",
            yaxis_type="log",
            yaxis_dtick=1,
            height=420,
        )  # decades only: minor labels are 9 px
    colors = [
        VERDICT_COLORS["faster"]
        if hi < 1 - NOISE_BAND
        else VERDICT_COLORS["slower"]
        if lo > 1 + NOISE_BAND
        else VERDICT_COLORS["neither"]
        for lo, hi in zip(t["ratio_low"], t["ratio_high"], strict=True)
    ]
    fig = go.Figure(
        go.Bar(
            y=labels,
            x=t["ratio"],
            orientation="h",
            marker_color=colors,
            error_x={
                "type": "data",
                "symmetric": False,
                "array": t["ratio_high"] - t["ratio"],
                "arrayminus": t["ratio"] - t["ratio_low"],
            },
            hovertemplate="%{y}<br>time ratio %{x:.3f}<extra></extra>",
        )
    )
    fig.add_vline(x=1.0, line_dash="dot")
    if t.empty:
        fig.add_annotation(
            text="nothing measured within the budget (see the findings)",
            showarrow=False,
            x=1.0,
            y=0.5,
            yref="paper",
        )
    title = (
        "intra-op threads and spinning: time ratio to the baseline"
        if kind == "threads"
        else "each candidate: time ratio to the baseline, interval ≥ 95 % "
        "(blue faster, red slower, grey within noise)"
    )
    return layout(
        fig,
        f"{esc(d.model)}: {title}",
        xaxis_title="time ratio (< 1 is faster)",
        height=max(260, 28 * len(labels) + 90),
        yaxis={"autorange": "reversed"},
    )
