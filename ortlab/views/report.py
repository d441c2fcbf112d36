"""The HTML report: one self-contained file (plotly bundled, no network) with the model summary,
placement, optimization diff, profile charts, quantization comparison, the doctor's findings
and the environment the results were measured on (the doctor's own renderers are
:mod:`ortlab.views.doctor`).

Every string from the model goes through :func:`ortlab.views.html.esc` (HTML) or
:func:`ortlab.views.html.script_json` (figure data, in non-executed JSON blocks). The page's
Content-Security-Policy allows no network and exactly two scripts, by their sha256 hashes:
plotly.js and the loader that draws the figures; a missed escape could not run. Paths to
ortlab's cache and the home directory are never shown: the report travels.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from ortlab.analysis.generation.generate import GenerationResult
from ortlab.analysis.reportdata import ThisMachine, gather, this_machine
from ortlab.core.cache import cache_dir
from ortlab.core.model import Model, ModelLike, load
from ortlab.views.accelerators import whatif_html
from ortlab.views.benchmark import benchmark_html, load_text, p50_text
from ortlab.views.doctor import best_snippet, best_verdict, doctor_html
from ortlab.views.generate import generation_headline
from ortlab.views.graph.pack import pack
from ortlab.views.graph.page import page_module, state_block
from ortlab.views.html import (
    csp_hash,
    esc,
    inline_script,
    inputs_html,
    redact_paths,
    script_json,
    table_html,
)
from ortlab.views.model import model_summary_html
from ortlab.views.optimization import optimization_html
from ortlab.views.placement import placement_html
from ortlab.views.profile import fused_map, profile_html
from ortlab.views.quantization import compare_figure, compare_html
from ortlab.views.session import session_report_html

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from ortlab.analysis.benchmark import BenchmarkResult
    from ortlab.analysis.optimizers.levels import OptimizationResult
    from ortlab.analysis.placement.result import PlacementResult
    from ortlab.analysis.placement.whatifresult import WhatIfResult
    from ortlab.analysis.profiling import ProfileResult
    from ortlab.analysis.quantization.compare import CompareResult
    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike
    from ortlab.core.result import Result
    from ortlab.diagnosis.doctor import DoctorResult

__all__ = ["report", "report_html"]

_CSP = (
    "default-src 'none'; script-src {hashes} blob:; worker-src blob:; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; base-uri 'none'; form-action 'none'"
)  # blob: is the graph view's modules and layout worker, made from the hashed module's texts

# Draws every figure from its JSON block (data, never executed): the only script besides
# plotly.js, so the CSP can name both by hash.
_LOADER = """
for (const block of document.querySelectorAll("script.ortlab-figure")) {
  const fig = JSON.parse(block.textContent);
  const div = document.createElement("div");
  div.className = "ortlab-plot";
  block.after(div);
  Plotly.newPlot(div, fig.data, fig.layout, { displaylogo: false, responsive: true });
}
"""


# ---------------------------------------------------------------------- the report


def _figure_html(fig: go.Figure) -> str:
    """The figure as a JSON data block the loader draws (never executed itself)."""
    import plotly.io as pio

    data = json.loads(pio.to_json(fig, validate=False))
    return f'<script type="application/json" class="ortlab-figure">{script_json(data)}</script>'


def _model_file(m: Model) -> str:
    """The model's file name as its user knows it: their own file's name, else model.onnx
    (a model given as bytes or a proto lives in ortlab's cache under a hashed name)."""
    path = Path(m.path)
    if m.source == "path" and not path.resolve().is_relative_to(cache_dir().resolve()):
        return path.name
    return "model.onnx"


def _metadata_rows(m: Model) -> list[list[str]]:
    """What the model says about itself beyond the summary (doc strings, metadata_props)."""
    proto = m.proto
    rows = [["model doc string", proto.doc_string], ["graph doc string", proto.graph.doc_string]]
    rows += [[f"metadata: {p.key}", p.value] for p in proto.metadata_props]
    return [r for r in rows if r[1] or r[0].startswith("metadata")]


_META_INLINE_CHARS = 600


def _model_section(m: Model) -> str:
    summary = dataclasses.replace(m.summary, path=_model_file(m))
    meta = _metadata_rows(m)
    if not meta:
        return model_summary_html(summary)
    table = table_html(["", ""], meta)
    if sum(len(v) for _, v in meta) <= _META_INLINE_CHARS:
        return model_summary_html(summary) + table
    # long metadata (an OCR model's whole character set) folds: it is not what a reader needs
    return (
        model_summary_html(summary) + "<details><summary>metadata the model carries "
        f"({len(meta)} entries, {sum(len(v) for _, v in meta):,} characters)</summary>"
        f"{table}</details>"
    )


def _summary_html(
    model: Model,
    doctor: DoctorResult | None,
    profile: ProfileResult | None,
    benchmark: BenchmarkResult | None,
    generation: GenerationResult | None = None,
) -> str:
    """The verdict first: where the time goes (top 3 op types with shares), the findings with
    their measured gains, the best verified configuration and its snippet, and the conditions
    (machine, load, inputs). Every figure is one the sections below show; an LLM decoder
    says so first, in its one line."""
    parts: list[str] = []
    if model.summary.decoder:
        parts.append(f"<div><b>What it is</b>: {esc(model.summary.decoder, 300)}</div>")
    if model.summary.folder:
        parts.append(f"<div><b>Its folder</b>: {esc(model.summary.folder, 600)}</div>")
    if generation is not None:  # the Generation section's own headline
        parts.append(f"<div><b>Generation</b>: {esc(generation_headline(generation), 500)}</div>")
    if profile is not None:
        ops = profile.by_op_type().head(3)
        top = ", ".join(f"<b>{esc(r.op_type)}</b> {r.share:.0%}" for r in ops.itertuples())
        parts.append(
            f"<div><b>Where the time goes</b> (share of the median run's node time, "
            f"profiling on, {profile.runs} runs): {top}</div>"
        )
    if benchmark is not None:  # the Benchmark section's own sentences
        parts.append(
            f"<div><b>Latency</b> (profiling off, {benchmark.stats.count} runs): "
            f"{esc(p50_text(benchmark))}; {esc(load_text(benchmark))}</div>"
        )
    if doctor is not None:
        found = "".join(
            f"<li>{esc(f.title, 300)} — <i>{esc(f.gain, 300)}</i></li>" for f in doctor.findings[:6]
        )
        more = len(doctor.findings) - 6
        parts.append(
            f"<div><b>Findings</b> ({len(doctor.findings)}, measured gains in italics)</div>"
            + (
                f"<ul>{found}</ul>"
                if found
                else "<div>none: nothing the doctor checks for is wrong with this session</div>"
            )
            + (f"<div>… and {more} more below</div>" if more > 0 else "")
        )
        best = doctor.best
        snippet = best_snippet(best, _model_file(model))
        parts.append(
            f"<div><b>Best verified</b>: {esc(best.variant)} · "
            f"{esc(best.config.label())} — {esc(best_verdict(best), 800)}</div>"
            f"<pre style='background:#f6f6f6'>{esc(snippet, 5000)}</pre>"
        )
        load = ", ".join(f"{k} {v:.2f}" for k, v in doctor.other_cpu.items())
        inputs = ("synthetic (ortlab made them)" if doctor.synthetic else "given") + (
            f": {doctor.feeds}" if doctor.feeds else ""
        )
        parts.append(
            f"<div><b>Conditions</b>: {esc(doctor.environment.get('cpu', '?'))}, "
            f"{esc(doctor.environment.get('cpu_count', '?'))} logical CPUs, onnxruntime "
            f"{esc(doctor.environment.get('onnxruntime', '?'))}; inputs {esc(inputs, 600)}"
            + (f"; other processes' CPU per stage (cores): {esc(load)}" if load else "")
            + "</div>"
        )
    if not parts:
        return ""
    return "<div class='ortlab-summary'>" + "".join(parts) + "</div>"


# ---------------------------------------------------------------------- environment

_ENV_KEYS = ("cpu", "cpu_count", "onnxruntime", "ortlab", "python", "platform")


def _recorded(results: Mapping[str, object]) -> list[tuple[str, dict[str, str]]]:
    """The environments the results were measured on, identical ones merged."""
    out: list[tuple[str, dict[str, str]]] = []
    for label, r in results.items():
        env = dict(getattr(r, "environment", None) or {})
        if not env:
            continue
        for i, (names, seen) in enumerate(out):
            if seen == env:
                out[i] = (f"{names}, {label}", seen)
                break
        else:
            out.append((label, env))
    return out


def _differs(env: Mapping[str, str], here: Mapping[str, str]) -> list[str]:
    return [k for k in _ENV_KEYS if k in env and env.get(k) != here.get(k)]


def _measured_on_html(
    recorded: list[tuple[str, dict[str, str]]], here: dict[str, str], measured_here: list[str]
) -> str:
    """The line under the title: where the figures were measured, and a flag when that is not
    the machine writing the report."""
    lines = []
    if measured_here:
        what = esc(" and ".join(measured_here))
        lines.append(
            f"<div>Measured on: this machine ({esc(here.get('cpu', '?'))}, onnxruntime "
            f"{esc(here.get('onnxruntime', '?'))}) for the {what} this report ran "
            "itself.</div>"
        )
    elif not recorded:
        return (
            "<div>Measured on: not recorded in these results; the environment section "
            "shows the machine this report was written on.</div>"
        )
    lines += [
        f"<div>Measured on: <b>{esc(env.get('cpu', '?'))}</b> · {esc(env.get('cpu_count', '?'))} "
        f"CPUs · onnxruntime {esc(env.get('onnxruntime', '?'))} · "
        f"{esc(env.get('platform', '?'))} (recorded in the {esc(names)} result)</div>"
        for names, env in recorded
    ]
    for names, env in recorded:
        keys = _differs(env, here)
        if keys:
            lines.append(
                f'<div class="ortlab-warn">⚠ This report was written on another machine: the '
                f"environment recorded in the {esc(names)} result and this machine's differ "
                f"in {esc(', '.join(keys))}. Both are listed under Environment; the figures "
                "hold for the machine that measured them.</div>"
            )
    return "".join(lines)


def _environment_html(recorded: list[tuple[str, dict[str, str]]], machine: ThisMachine) -> str:
    here, here_eps = machine.environment, machine.providers
    headers = [
        "",
        *(f"measured on ({names})" for names, _ in recorded),
        "this machine (wrote the report)",
    ]
    keys = list(dict.fromkeys([*_ENV_KEYS, *(k for _, e in recorded for k in e), *here]))
    rows = []
    for k in keys:
        differ = any(k in e and e.get(k) != here.get(k) for _, e in recorded)
        rows.append(
            [f"⚠ {k}" if differ else k, *(e.get(k, "—") for _, e in recorded), here.get(k, "—")]
        )
    pad = ["—"] * len(recorded)
    rows.append(["available EPs", *pad, ", ".join(here_eps.in_build)])
    rows.append(
        [
            "devices",
            *pad,
            "; ".join(f"{d.ep_name}: {d.device_type} {d.device_vendor}" for d in here_eps.devices)
            or "—",
        ]
    )
    rows.append(["CPU flags", *pad, ", ".join(machine.cpu_flags) or "—"])
    return table_html(headers, rows)


# ---------------------------------------------------------------------- inputs


@dataclasses.dataclass(frozen=True)
class _Inputs:
    """What the report knows of the inputs of results it measured itself."""

    shapes: str
    synthetic: bool


def _timing_inputs(result: Result, own: _Inputs | None = None) -> str:
    """Whether ``result``'s timings used synthetic inputs, and at which shapes: read from the
    result (``feeds``: the shapes text, ``synthetic``), else what the report itself ran."""
    shapes = getattr(result, "feeds", None)
    synthetic = getattr(result, "synthetic", None)
    if shapes is None and synthetic is None and own is not None:
        shapes, synthetic = own.shapes, own.synthetic
    return inputs_html("Timings", str(shapes) if shapes else None, synthetic)


def _doctor_inputs(d: DoctorResult) -> str:
    accuracy = inputs_html(
        "Accuracy (cosine)", getattr(d, "eval_data", None), getattr(d, "eval_synthetic", None)
    )
    return _timing_inputs(d) + accuracy


def _compare_inputs(c: CompareResult) -> str:
    timing = inputs_html("Timings", getattr(c, "feeds", None), getattr(c, "feeds_synthetic", None))
    return timing + inputs_html("Accuracy (cosine, SQNR, top-1)", c.eval_data, c.synthetic)


# ---------------------------------------------------------------------- the page


def _graph_state(
    model: Model, placement: PlacementResult | None, profile: ProfileResult | None
) -> str:
    """The graph view's state block for the report: EP and time from the placement join
    (original nodes), else time from the profile where its node names are the model's; ''
    without either."""
    import warnings

    from ortlab.analysis.graph.data import graph_data

    if placement is None and profile is None:
        return ""
    with warnings.catch_warnings():  # a profile of fused nodes: the graph says what it lacks
        warnings.simplefilter("ignore")
        g = (
            graph_data(model, placement=placement)
            if placement is not None
            else graph_data(model, profile=profile)
        )
    return state_block(pack(g), "time" if g.has_time else "provider", list(g.expanded))


SECTION_TITLES = {
    "GenerationResult": "Generation: the prefill, then token by token (measured)",
    "RooflineResult": "Roofline: is each node near this machine's limits?",
    "CostResult": "Cost: the work each node does (computed from shapes, not measured)",
    "ThroughputResult": "Throughput per concurrency level (measured)",
    "SweepResult": "Shape sweep (measured; accelerator shares predicted)",
    "VersionDiffResult": "Two onnxruntime versions, node by node (measured)",
    "DivergenceResult": "Where the numbers change: the first divergent node (measured)",
}
"""The report's section title for each result it takes in ``extra``."""


def _result_section(result: Result) -> tuple[str, str]:
    """A result the report does not lay out itself: its own HTML and its main figure."""
    name = type(result).__name__
    title = SECTION_TITLES.get(name, name)
    return title, result._repr_html_() + _figure_html(result.plot())


def _timing_sections(
    compare: CompareResult | None,
    benchmark: BenchmarkResult | None,
    history: pd.DataFrame | None,
) -> list[tuple[str, str]]:
    out = []
    if compare is not None:
        out.append(
            (
                "Quantization comparison",
                compare_html(compare)
                + _compare_inputs(compare)
                + _figure_html(compare_figure(compare)),
            )
        )
    if benchmark is not None:
        out.append(
            (
                "Benchmark",
                benchmark_html(benchmark)
                + _timing_inputs(benchmark)
                + _figure_html(benchmark.plot()),
            )
        )
    if history is not None and len(history):
        cols = [c for c in history.columns if c != "config"]
        out.append(("History", table_html(cols, history[cols].values.tolist())))
    return out


class Given(TypedDict, total=False):
    """Results a caller already has, for the report to show as they are (by the verb that
    made them): the doctor's own profile, placement and what-if stand in for any not given."""

    profile: ProfileResult | None
    placement: PlacementResult | None
    optimization: OptimizationResult | None
    compare: CompareResult | None
    benchmark: BenchmarkResult | None
    history: pd.DataFrame | None
    whatif: WhatIfResult | None


def _with_doctor(given: Given, doctor: DoctorResult | None) -> Given:
    """``given``, with the doctor's profile, placement and what-if where none was given."""
    out = given.copy()
    if doctor is not None:
        if out.get("profile") is None:
            out["profile"] = doctor.profile
        if out.get("placement") is None:
            out["placement"] = doctor.placement
        if out.get("whatif") is None:
            out["whatif"] = doctor.whatif
    return out


def report_html(
    model: Model,
    doctor: DoctorResult | None = None,
    *,
    title: str | None = None,
    measured_here: Mapping[str, tuple[str, bool]] | None = None,
    machine: ThisMachine | None = None,
    extra: Sequence[Result] = (),
    **given: Unpack[Given],
) -> str:
    """The report as one HTML string (see :func:`report`); nothing is measured here.

    ``measured_here``: for results :func:`report` measured itself on this machine ('profile',
    'optimization'), the inputs they ran on (shapes text, synthetic); ``machine``: the machine
    writing the report (default: this one, asked now)."""
    from plotly.offline import get_plotlyjs

    own = {k: _Inputs(*v) for k, v in (measured_here or {}).items()}
    given = _with_doctor(given, doctor)
    profile, placement = given.get("profile"), given.get("placement")
    optimization, compare = given.get("optimization"), given.get("compare")
    benchmark, history = given.get("benchmark"), given.get("history")
    sections: list[tuple[str, str]] = []
    generation = next((x for x in extra if isinstance(x, GenerationResult)), None)
    summary = _summary_html(model, doctor, profile, benchmark, generation)
    if summary:
        sections.append(("Summary", summary))
    sections.append(("Model", _model_section(model)))
    after_model = len(sections)  # the graph goes here, once its state is known
    if doctor is not None:
        sections.append(
            (
                "Doctor: findings and verified fixes",
                doctor_html(doctor, _model_file(model))
                + _doctor_inputs(doctor)
                + _figure_html(doctor.plot("candidates"))
                + _figure_html(doctor.plot("threads"))
                + _figure_html(doctor.plot("pareto")),
            )
        )
    if placement is not None:
        sections.append(
            (
                "Placement: where each node runs",
                placement_html(placement) + _timing_inputs(placement),
            )
        )
    elif profile is not None and profile.report is not None:
        sections.append(("Placement", session_report_html(profile.report)))
    whatif = given.get("whatif")
    if whatif is not None:
        sections.append(("Where would it run? (predicted, not measured)", whatif_html(whatif)))
    if optimization is not None:
        sections.append(
            (
                "Graph optimization levels",
                optimization_html(optimization)
                + _timing_inputs(optimization, own.get("optimization"))
                + _figure_html(optimization.plot()),
            )
        )
    if profile is not None:
        kinds = ["op_type", "sunburst", "timeline"]
        if (profile.memory()["in_use_bytes"] > 0).any():  # ORT recorded memory per node
            kinds.append("memory")
        figs = "".join(_figure_html(profile.plot(k)) for k in kinds)
        sections.append(
            (
                "Profile: where the time goes",
                profile_html(profile, fused=fused_map(placement, profile))
                + _timing_inputs(profile, own.get("profile"))
                + figs,
            )
        )
    roof = getattr(doctor, "roofline", None)
    sections += [_result_section(r) for r in ([roof] if roof is not None else []) + list(extra)]
    sections += _timing_sections(compare, benchmark, history)
    graph_state = _graph_state(model, placement, profile)
    if graph_state:
        sections.insert(
            after_model,
            (
                "Graph: where each node runs and where its time goes",
                "<div id='ortlab-root'></div>"
                "<div><i>Click a node for its details, a group to open it; f fits, "
                "/ searches.</i></div>",
            ),
        )
    machine = machine if machine is not None else this_machine()
    here = machine.environment
    recorded = _recorded({"doctor": doctor, "benchmark": benchmark})
    sections.append(("Environment", _environment_html(recorded, machine)))
    heading = title or f"ortlab report: {model.name}"
    nav = " · ".join(f"<a href='#s{i}'>{esc(name)}</a>" for i, (name, _) in enumerate(sections))
    body = "".join(
        f"<section id='s{i}'><h2>{esc(name)}</h2>{html}</section>"
        for i, (name, html) in enumerate(sections)
    )
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    plotly_js = get_plotlyjs()
    hashes = [csp_hash(plotly_js), csp_hash(_LOADER)] + (
        [csp_hash(page_module())] if graph_state else []
    )
    csp = _CSP.format(hashes=" ".join(hashes))
    top = f"<h1>{esc(heading)}</h1><div>generated {stamp} by ortlab · {nav}</div>"
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{csp}\">"
        f"<title>{redact_paths(esc(heading))}</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:20px;max-width:1200px}"
        "h2{border-bottom:2px solid #4C78A8;padding-bottom:2px;margin-top:28px}"
        "pre{white-space:pre-wrap;font-size:12px}.ortlab-plot{width:100%}</style>"
        f"{inline_script(plotly_js)}</head><body>"
        + redact_paths(top + _measured_on_html(recorded, here, sorted(own)) + body)
        + inline_script(_LOADER)
        + (graph_state + inline_script(page_module(), ' type="module"') if graph_state else "")
        + "</body></html>"
    )


def report(
    model: ModelLike,
    doctor: DoctorResult | None = None,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    path: str | Path = "report.html",
    dims: Mapping[str, int] | None = None,
    compute: bool = True,
    levels: Sequence[str] = ("disabled", "basic", "extended", "all"),
    progress: bool | Callable[[int, int], None] = False,
    extra: Sequence[Result] = (),
    **given: Unpack[Given],
) -> Path:
    """Write the HTML report of ``model`` to ``path`` and return the path.

    Results you pass are used as they are; with ``compute=True`` the missing placement join
    (whose profile is the report's profile, and which the embedded graph view draws with EP
    and time) and optimization diff are measured (the doctor's are reused). ``extra``: more
    results shown as sections of their own (``ortlab.cost``, ``throughput``, ``sweep``,
    ``version_diff``…); the doctor's roofline is shown when it measured one. What it measures
    runs at ``feeds``, else at ``dims`` (the verbs' grammar)."""

    m = load(model)
    got = gather(
        m,
        doctor,
        config=config,
        feeds=feeds,
        dims=dims,
        profile=given.get("profile"),
        placement=given.get("placement"),
        optimization=given.get("optimization"),
        compute=compute,
        levels=levels,
        progress=progress,
    )
    if got.generation is not None and not any(x is got.generation for x in extra):
        extra = [got.generation, *extra]
    shown = given.copy()  # what was given, with what was measured here in its place
    shown["profile"], shown["placement"] = got.profile, got.placement
    shown["optimization"] = got.optimization
    text = report_html(m, doctor, measured_here=got.measured_here, extra=extra, **shown)
    out = Path(path)
    out.write_text(text, encoding="utf-8")
    return out
