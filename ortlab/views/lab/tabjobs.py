"""The jobs the Lab's buttons start besides its run: each tab's own (the optimization diff, the
quantization comparison, the divergence, the doctor, the generation and its matrix, a Limits
job, the Placement tab's what-if, History's "compare A and B") and the snippet and report
buttons. Each is a function of the Lab as its jobs see it (:class:`~ortlab.views.lab.host.LabHost`):
it asks the analysis at the Lab's config and shapes, shows the result in its tab and returns it;
the Lab keeps it in its state (:mod:`state`). The Lab starts each as one of its jobs
(:mod:`jobs`), whose status line is that tab's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as w

from ortlab.analysis.diff import DiffResult, diff
from ortlab.analysis.diverge import DivergenceResult, diverge
from ortlab.analysis.generation.bench import LLMBenchResult, llm_bench
from ortlab.analysis.generation.generate import generate
from ortlab.analysis.generation.result import GenerationResult
from ortlab.analysis.graph.data import graph_data
from ortlab.analysis.optimizers.levels import OptimizationResult, optimization_diff
from ortlab.analysis.placement.result import PlacementResult
from ortlab.analysis.placement.whatif import whatif
from ortlab.analysis.placement.whatifresult import WhatIfResult
from ortlab.analysis.quantization.compare import CompareResult, compare
from ortlab.analysis.quantization.error import quantization_error
from ortlab.analysis.quantization.quantize import quantize, to_fp16
from ortlab.core.errors import OrtlabError
from ortlab.core.grammar import int_list
from ortlab.core.model import Model, load
from ortlab.core.result import Result
from ortlab.diagnosis.doctor import DoctorResult, doctor
from ortlab.views.html import esc
from ortlab.views.lab.host import LabHost
from ortlab.views.lab.limits import LIMITS_JOBS, safe_filename
from ortlab.views.lab.outputs import set_outputs
from ortlab.views.lab.pickers import generation_node_options
from ortlab.views.report import report

if TYPE_CHECKING:
    from ortlab.views.graph.widget import GraphView

__all__ = [
    "OPENING",
    "compare_runs",
    "opening_generation",
    "run_diverge",
    "run_doctor",
    "run_generate",
    "run_limits",
    "run_llm_bench",
    "run_optimization",
    "run_quantization",
    "run_whatif",
    "show_snippet",
    "write_report",
]


def _graph(
    model: Model, placement: PlacementResult | None, diff: DiffResult | None = None
) -> GraphView:
    """``ortlab.graph(model, placement=…, diff=…)``: the widget library imported on first use."""
    from ortlab.views.graph.widget import GraphView

    return GraphView(graph_data(model, placement=placement, diff=diff))


def run_optimization(lab: LabHost) -> OptimizationResult:
    """The Optimization tab: what each optimization level changed, on the CPU."""
    opt = optimization_diff(
        lab.model,
        config=lab.config.with_(providers=["cpu"]),
        progress=lab.progress_for("levels"),
        **lab.inputs(),
    )
    lab.show("Optimization", lab.tab_controls.opt_bar, opt, opt.plot(), opt.counts.T)
    return opt


def run_quantization(lab: LabHost) -> CompareResult:
    """The Quantization tab: fp16, dynamic int8 and static QDQ timed against the model, and
    the static variant's per-tensor error."""
    m, inputs = lab.model, lab.inputs()
    lab.announce("building fp16")  # said on the tab: this takes a while, silently
    variants = [to_fp16(m)]
    lab.announce("building dynamic int8")
    variants.append(quantize(m, mode="dynamic"))
    lab.announce("building static QDQ (calibration)")
    variants.append(quantize(m, mode="static", calibration_size=8, **inputs))
    lab.announce("timing the variants")
    cmp = compare(m, variants, lab.config, progress=lab.progress_for("variants"), **inputs)
    lab.announce("the per-tensor error")
    err = quantization_error(m, variants[2], **inputs)  # at the timed shapes
    dv = lab.state.divergence
    lab.show(
        "Quantization",
        lab.tab_controls.quant_bar,
        cmp,
        cmp.plot(),
        lab.tab_controls.worst_label,
        err.worst(10),
        *([dv, dv.plot()] if dv is not None else []),
    )
    return cmp


def run_diverge(lab: LabHost) -> DivergenceResult:
    """The Quantization tab's accuracy view: where the Lab's model at its config and the
    chosen other side (a level, the fp16 or static QDQ variant) stop agreeing, tensor by
    tensor, beside the variants' worst tensors; the graph coloured by each node's error."""
    m, inputs, choice = lab.model, lab.inputs(), lab.tab_controls.diverge_against.value
    against: Any
    if choice.startswith("level="):
        against = {"level": choice.removeprefix("level=")}
    elif choice == "fp16":
        lab.announce("building fp16")
        against = to_fp16(m)
    else:
        lab.announce("building static QDQ (calibration)")
        against = quantize(m, mode="static", calibration_size=8, **inputs)
    dv = diverge(m, against, lab.config, progress=lab.progress_for("diverge"), **inputs)
    first = dv.first.node if dv.first else None
    from ortlab.views.graph.widget import GraphView, error_options

    items = [dv, dv.plot(), GraphView(graph_data(m, error=dv), **error_options(first))]
    cmp = lab.state.comparison
    if cmp is not None:
        items += [cmp, cmp.plot()]
    lab.show("Quantization", lab.tab_controls.quant_bar, *items)
    return dv


def run_doctor(lab: LabHost) -> DoctorResult:
    """The Doctor tab: the doctor at the Lab's config within the budget box's seconds; its
    best can then be applied (:meth:`Lab.apply_best`) and the Overview names it."""
    d = doctor(
        lab.model,
        lab.config,
        budget_s=lab.tab_controls.budget.value,
        progress=lab.progress_for("doctor"),
        **lab.inputs(),
    )
    lab.tab_controls.apply_button.disabled = False
    lab.show(
        "Doctor",
        lab.tab_controls.doctor_bar,
        d,
        d.plot("candidates"),
        d.plot("threads"),
        d.plot("pareto"),
    )
    return d  # the Lab's Overview then names the best


OPENING = (32, 16)
"""A decoder Lab's first generation: prompt and new tokens (short: the Overview leads with it;
the Generate tab's boxes run longer ones)."""


def opening_generation(lab: LabHost) -> GenerationResult | None:
    """A decoder Lab's first run ends with a short generation (:data:`OPENING`, profiling
    off, at the Lab's settings), so its Overview leads with TTFT and tokens/s and the Generate
    tab opens on a result. None when the model is no decoder or it already has one; a failure
    is said in the Generate tab and is not the run's (its results stand)."""
    m, t = lab.current_model, lab.tab_controls
    if m.decoder is None or lab.state.generation is not None:
        return None
    prompt, new = OPENING
    if m.decoder.max_length:
        prompt = max(1, min(prompt, m.decoder.max_length // 2))
        new = max(1, min(new, m.decoder.max_length - prompt))
    lab.announce("a short generation (TTFT, tokens/s)")
    try:
        g = generate(
            m,
            lab.config,
            prompt=prompt,
            new_tokens=new,
            profile=False,
            progress=lab.progress_for("a short generation"),
        )
    except OrtlabError as err:
        note = w.HTML(f"<i>The short generation on opening failed: {esc(str(err), 800)}</i>")
        lab.show("Generate", t.gen_bar, note)
        return None
    said = w.HTML(
        f"<i>A short generation run on opening (prompt {g.prompt}, {g.new_tokens} new tokens, "
        "synthetic ids, profiling off): Generate runs the boxes' lengths, profiled, and "
        "splits each phase by layer.</i>"
    )
    lab.show("Generate", t.gen_bar, said, *t.generate_items(g))
    return g


def run_generate(lab: LabHost) -> GenerationResult:
    """The Generate tab (a decoder's): greedy generations of the boxes' prompt and new tokens
    at the Lab's settings, the time per token against the cache, then the result (TTFT and
    tokens/s with intervals, the KV cache, the phase x layer shares)."""
    t = lab.tab_controls
    g = generate(
        lab.current_model,
        lab.config,
        prompt=t.gen_prompt.value,
        new_tokens=t.gen_new.value,
        progress=lab.progress_for("generate"),
    )
    with lab.held():  # new options are not a request to re-run
        t.gen_nodes.options = generation_node_options(g)
        t.gen_nodes.value = None
    r = lab.state.llm_bench
    bench = [r.plot(), r] if r is not None else []
    lab.show("Generate", t.gen_bar, *t.generate_items(g), *bench)
    return g  # the Lab's Overview then leads with the generation


def run_llm_bench(lab: LabHost) -> LLMBenchResult:
    """The Generate tab's matrix: llama-bench's pp and tg tests at the boxes' prompt and new
    tokens, at each depth in the depths box, 3 repetitions, at the Lab's settings; shown under
    the last generation (tg tokens/s against depth, the table, each cell by layer)."""
    t = lab.tab_controls
    typed = t.bench_depths.value
    depths = sorted(set(int_list(typed, "depths"))) if typed.strip() else []
    r = llm_bench(
        lab.current_model,
        lab.config,
        prompt=(t.gen_prompt.value,),
        new_tokens=(t.gen_new.value,),
        depth=depths or (0,),
        repetitions=3,
        progress=lab.progress_for("the matrix"),
    )
    g = lab.state.generation
    shown = t.generate_items(g) if g is not None else []
    lab.show("Generate", t.gen_bar, r.plot(), r, *shown)
    return r


def run_limits(lab: LabHost, what: str) -> Result | Path:
    """A Limits tab's button: ``what`` is the row of ``LIMITS_JOBS`` (the state field its
    result replaces: roofline, cost, throughput, sweep, version_diff, perfetto)."""
    result, items = LIMITS_JOBS[what].call(lab)
    lab.show("Limits", lab.tab_controls.limits_bar, *items)
    return result


def run_whatif(lab: LabHost) -> WhatIfResult:
    """The chosen accelerator's predicted partition at the Lab's shapes (its compiler where
    one runs without the device); the Lab shows it under the measured placement
    (:func:`whatif_items`)."""
    t = lab.tab_controls
    target = t.target.value
    w_ = whatif(
        lab.model,
        [target],
        progress=lab.progress_for(f"what if {target}"),
        qnn_options=t.qnn_options(),
        **lab.inputs(),
    )
    return w_


def whatif_items(model: Model, w_: WhatIfResult) -> list[object]:
    """What the Placement tab shows of a what-if under the measured placement: the result,
    its reasons and, where its target's placement is known, that placement on the graph."""
    items: list[object] = [w_, w_.reasons()]
    target = w_.targets[0]
    if target.evidence in ("compiled", "rules", "measured"):
        items.append(_graph(model, w_[target.target]))
    return items


def compare_runs(lab: LabHost) -> DiffResult | None:
    """History's "compare A and B": the two runs' table and where they disagree, then per
    node (``ortlab.diff`` of their placements) on the graph."""
    t = lab.tab_controls
    a, b = t.run_a.value, t.run_b.value
    if a is None or b is None:
        return None
    items: list[Any] = lab.history.comparison(a, b)  # the table, and where it disagrees
    ra, rb = lab.history.run(a), lab.history.run(b)
    d = None
    if ra.placement is not None and rb.placement is not None:  # per node, on the graph
        d = diff(ra.placement, rb.placement, labels=(f"run {a}", f"run {b}"))
        same = ra.model_path == rb.model_path  # the model's own name, not its file's
        model = load(ra.model_path, name=lab.model.name) if same else lab.model
        items += [d, d.plot(), _graph(model, rb.placement, diff=d)]
    lab.shown["History comparison"] = items
    set_outputs(t.comparison_out, items)
    return d


def write_report(lab: LabHost, path: str | os.PathLike[str] | None = None) -> Path:
    """The report button's job (:meth:`Lab.export_report`): the Lab's state as one HTML
    file, by default ``ortlab-report-<model>.html`` in the working directory."""
    lab.wait()  # a job in flight (the first run of a Lab) is in the report
    target = (
        Path(path) if path else Path.cwd() / f"ortlab-report-{safe_filename(lab.model.name)}.html"
    )
    st = lab.state
    extra = (
        st.generation,
        st.llm_bench,
        st.roofline,
        st.cost,
        st.throughput,
        st.sweep,
        st.version_diff,
    )
    out = report(
        lab.model,
        st.doctor,
        path=target,
        compute=False,
        placement=st.placement,
        profile=st.profile,
        optimization=st.optimization,
        compare=st.comparison,
        benchmark=st.benchmark,
        history=lab.history.to_pandas(),
        extra=[r for r in extra if r is not None],
    )
    lab.notice.value = (
        f"report written: <a href='{esc(out.name)}' target='_blank'>"
        f"{esc(out)}</a> ({out.stat().st_size / 1e6:.1f} MB)"
    )
    return out


def show_snippet(lab: LabHost, run: int | None = None) -> None:
    """Plain-onnxruntime Python for the current settings or for run ``run``: the model
    file that run used (an int8 run names the int8 file) and its settings."""
    if run is None:
        cfg, path, shapes = lab.config, str(lab.current_model.path), ""
        if lab.history.records and lab.history.records[-1].model_path == path:
            shapes = lab.history.records[-1].shapes
    else:
        record = lab.history.run(run)
        cfg, path, shapes = record.config, record.model_path, record.shapes
    code = cfg.snippet(path) + (f"\n# ortlab ran it with {shapes}" if shapes else "")
    title = "plain onnxruntime" + ("" if run is None else f" (run {run})")
    lab.notice.value = f"<b>{title}</b><pre>{esc(code, 20000)}</pre>"
