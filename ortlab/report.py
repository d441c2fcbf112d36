"""The HTML report: one self-contained file (plotly bundled, no network) with the model summary,
placement, optimization diff, profile charts, quantization comparison, the doctor's findings
and the environment. Also the doctor's own text/HTML renderers.

Every string from the model goes through :func:`ortlab.render.esc`; the page carries a
Content-Security-Policy that allows no network access, so even a missed escape could not load
anything. Figures are the plot layer's (the same the Lab shows).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ortlab.render import _STYLE, esc, safe_text, table_html

__all__ = ["doctor_html", "doctor_text", "report", "report_html"]

CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:"
)


# ---------------------------------------------------------------------- doctor renderers


def doctor_text(d: Any) -> str:
    lines = [f"Doctor: {safe_text(d.model)} — {len(d.findings)} findings, baseline p50 "
             f"{d.baseline_ms:.3f} ms, {len(d.measured)} candidates measured in "
             f"{d.elapsed_s:.0f} s ({d.rounds} rounds x {d.runs} runs, interleaved)"]  # fmt: skip
    for i, f in enumerate(d.findings, 1):
        lines += [
            f"{i}. [{f.severity}] {safe_text(f.title, 300)}",
            f"   evidence: {safe_text(f.evidence, 2000)}",
            f"   fix: {safe_text(f.fix, 2000)}",
            f"   gain: {safe_text(f.gain, 500)}",
            f"   code: {safe_text(f.code, 500)}",
        ]
    lines.append(f"BEST: {d.best.variant} · {d.best.session_config.label()} — {d.best.verdict}")
    if d.stages:
        lines.append("time: " + ", ".join(f"{k} {v:.1f} s" for k, v in d.stages.items()))
    lines += [f"note: {safe_text(n, 2000)}" for n in d.notes]
    return "\n".join(lines)


def doctor_html(d: Any) -> str:
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
    cand = [[m.key, m.label, m.p50_ms, f"{m.ratio:.3f} [{m.low:.3f}, {m.high:.3f}]",
             "—" if m.cosine != m.cosine else f"{m.cosine:.5f}", m.stage]
            for m in d.measured]  # fmt: skip
    notes = "".join(f"<div><i>{esc(n, 2000)}</i></div>" for n in d.notes)
    return (
        f"{_STYLE}<div class='ortlab-doctor'><div><b>{esc(d.model)}</b> · baseline p50 "
        f"{d.baseline_ms:.3f} ms · {len(d.measured)} candidates in {d.elapsed_s:.0f} s "
        f"({d.rounds} rounds × {d.runs} runs, interleaved)</div><ol>{items}</ol>"
        f"<div><b>Best verified</b>: {esc(d.best.variant)} · "
        f"{esc(d.best.session_config.label())} — {esc(d.best.verdict, 500)}</div>"
        f"<pre style='background:#f6f6f6'>{esc(d.best.snippet(), 5000)}</pre>"
        + table_html(["key", "candidate", "p50 ms", "ratio [95% CI]", "cosine", "stage"], cand)
        + notes
        + "</div>"
    )


# ---------------------------------------------------------------------- the report


def _figure_html(fig: Any) -> str:
    import plotly.io as pio

    return str(pio.to_html(fig, full_html=False, include_plotlyjs=False,
                           config={"displaylogo": False, "responsive": True}))  # fmt: skip


def _environment_rows() -> list[list[str]]:
    import onnxruntime as ort

    from ortlab.benchmark import environment
    from ortlab.runtime import cpu_flags, devices

    env = environment()
    rows = [[k, v] for k, v in env.items()]
    rows.append(["available EPs", ", ".join(ort.get_available_providers())])
    rows.append(["devices", "; ".join(f"{d.ep_name}: {d.device_type} {d.device_vendor}"
                                      for d in devices()) or "—"])  # fmt: skip
    rows.append(["CPU flags", ", ".join(cpu_flags()) or "—"])
    return rows


def report_html(
    model: Any,
    doctor: Any = None,
    *,
    profile: Any = None,
    placement: Any = None,
    optimization: Any = None,
    compare: Any = None,
    benchmark: Any = None,
    history: Any = None,
    title: str | None = None,
) -> str:
    """The report as one HTML string (see :func:`report`); nothing is computed here."""
    from plotly.offline import get_plotlyjs

    from ortlab import plots
    from ortlab.render import (
        _report_html,
        benchmark_html,
        compare_html,
        model_summary_html,
        optimization_html,
        placement_html,
        profile_html,
    )

    profile = profile if profile is not None else getattr(doctor, "profile", None)
    placement = placement if placement is not None else getattr(doctor, "placement", None)
    sections: list[tuple[str, str]] = [("Model", model_summary_html(model.summary))]
    if doctor is not None:
        sections.append(("Doctor: findings and verified fixes", doctor_html(doctor)
                         + _figure_html(doctor.plot("candidates"))
                         + _figure_html(doctor.plot("threads"))
                         + _figure_html(doctor.plot("pareto"))))  # fmt: skip
    if placement is not None:
        sections.append(("Placement: where each node runs", placement_html(placement)))
    elif profile is not None and profile.report is not None:
        sections.append(("Placement", _report_html(profile.report)))
    if optimization is not None:
        sections.append(("Graph optimization levels", optimization_html(optimization)
                         + _figure_html(optimization.plot())))  # fmt: skip
    if profile is not None:
        figs = "".join(_figure_html(profile.plot(k)) for k in ("op_type", "sunburst", "timeline"))
        sections.append(("Profile: where the time goes", profile_html(profile) + figs))
    if compare is not None:
        sections.append(("Quantization comparison", compare_html(compare)
                         + _figure_html(plots.compare_figure(compare))))  # fmt: skip
    if benchmark is not None:
        sections.append(("Benchmark", benchmark_html(benchmark) + _figure_html(benchmark.plot())))
    if history is not None and len(history):
        cols = [c for c in history.columns if c != "config"]
        sections.append(("History", table_html(cols, history[cols].values.tolist())))
    sections.append(("Environment", table_html(["", ""], _environment_rows())))
    heading = title or f"ortlab report: {model.name}"
    nav = " · ".join(f"<a href='#s{i}'>{esc(name)}</a>" for i, (name, _) in enumerate(sections))
    body = "".join(f"<h2 id='s{i}'>{esc(name)}</h2>{html}"
                   for i, (name, html) in enumerate(sections))  # fmt: skip
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        f"<title>{esc(heading)}</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:20px;max-width:1200px}"
        "h2{border-bottom:2px solid #4C78A8;padding-bottom:2px;margin-top:28px}"
        "pre{white-space:pre-wrap;font-size:12px}</style>"
        f"<script>{get_plotlyjs()}</script></head><body>"
        f"<h1>{esc(heading)}</h1><div>generated {stamp} by ortlab · {nav}</div>"
        f"{body}</body></html>"
    )


def report(
    model: Any,
    doctor: Any = None,
    *,
    path: str | Path = "report.html",
    config: Any = None,
    feeds: Mapping[str, Any] | None = None,
    profile: Any = None,
    placement: Any = None,
    optimization: Any = None,
    compare: Any = None,
    benchmark: Any = None,
    history: Any = None,
    compute: bool = True,
    levels: Sequence[str] = ("disabled", "basic", "extended", "all"),
    progress: Any = False,
) -> Path:
    """Write the HTML report of ``model`` to ``path`` and return the path.

    Results you pass are used as they are; with ``compute=True`` the missing profile and
    optimization diff are measured (the doctor's profile and placement are reused)."""
    from ortlab.model import load

    m = load(model)
    if compute:
        from ortlab.engine import as_config
        from ortlab.optimization import optimization_diff
        from ortlab.profiling import profile as run_profile
        from ortlab.tasks import COMPILING_EPS

        cfg = as_config(config if config is not None else getattr(doctor, "requested", None))
        cfg = cfg.with_(fallback="allow")  # a fallback is reported, not raised, in a report
        if profile is None and getattr(doctor, "profile", None) is None:
            profile = run_profile(m, cfg, feeds, runs=10, progress=progress)
        providers = () if cfg.providers == "auto" else cfg.providers
        if optimization is None and not set(providers) & set(COMPILING_EPS):
            optimization = optimization_diff(m, levels, cfg, feeds, rounds=5, runs=5,
                                             progress=progress)  # fmt: skip
    text = report_html(m, doctor, profile=profile, placement=placement, optimization=optimization,
                       compare=compare, benchmark=benchmark, history=history)  # fmt: skip
    out = Path(path)
    out.write_text(text, encoding="utf-8")
    return out
