"""The jobs the Lab's buttons start besides its run: each tab's own (the optimization diff, the
quantization comparison, the doctor, a Limits job, the Placement tab's what-if, History's
"compare A and B") and the snippet and report buttons. Each is a function of the Lab: it asks
the analysis at the Lab's config and shapes, keeps the result on the Lab and shows it in its
tab; the Lab starts it as one of its jobs (:mod:`labjobs`), whose status line is that tab's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as w

from ortlab.analysis.diff import diff
from ortlab.analysis.diverge import diverge
from ortlab.analysis.generation.bench import llm_bench
from ortlab.analysis.generation.generate import generate
from ortlab.analysis.graph.data import graph_data
from ortlab.analysis.limits.cost import cost
from ortlab.analysis.limits.roofline import roofline
from ortlab.analysis.optimizers.levels import optimization_diff
from ortlab.analysis.placement.whatif import whatif
from ortlab.analysis.quantization.compare import compare
from ortlab.analysis.quantization.error import quantization_error
from ortlab.analysis.quantization.quantize import quantize, to_fp16
from ortlab.analysis.sweep import sweep
from ortlab.analysis.throughput import throughput
from ortlab.analysis.versions import version_diff
from ortlab.core.dimtext import parse_dims
from ortlab.core.errors import OrtlabError
from ortlab.core.model import load
from ortlab.diagnosis.doctor import doctor
from ortlab.views.html import esc
from ortlab.views.report import report
from ortlab.views.widgets.laboutputs import set_outputs
from ortlab.views.widgets.pickers import generation_node_options

if TYPE_CHECKING:
    from ortlab.views.widgets.lab import Lab

__all__ = [
    "LIMITS_INTRO",
    "compare_runs",
    "limits_job",
    "run_diverge",
    "run_doctor",
    "run_limits",
    "run_optimization",
    "run_quantization",
    "run_whatif",
    "safe_filename",
    "show_snippet",
    "write_report",
]


def _graph(model: Any, placement: Any, diff: Any = None) -> Any:
    """``ortlab.graph(model, placement=…, diff=…)``: the widget library imported on first use."""
    from ortlab.views.graph.widget import GraphView

    return GraphView(graph_data(model, placement=placement, diff=diff))


def run_optimization(lab: Lab) -> None:
    """The Optimization tab: what each optimization level changed, on the CPU."""
    opt = optimization_diff(
        lab.model,
        config=lab.config.with_(providers=["cpu"]),
        progress=lab.progress_for("levels"),
        **lab.inputs(),
    )
    lab.optimization = opt
    lab.show("Optimization", lab.tab_controls.opt_bar, opt, opt.plot(), opt.counts.T)


def run_quantization(lab: Lab) -> None:
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
    lab.comparison = cmp
    lab.show(
        "Quantization",
        lab.tab_controls.quant_bar,
        cmp,
        cmp.plot(),
        lab.tab_controls.worst_label,
        err.worst(10),
        *([lab.divergence, lab.divergence.plot()] if lab.divergence is not None else []),
    )


def run_diverge(lab: Lab) -> None:
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
    lab.divergence = dv
    first = dv.first.node if dv.first else None
    from ortlab.views.graph.widget import GraphView, error_options

    items = [dv, dv.plot(), GraphView(graph_data(m, error=dv), **error_options(first))]
    if lab.comparison is not None:
        items += [lab.comparison, lab.comparison.plot()]
    lab.show("Quantization", lab.tab_controls.quant_bar, *items)


def run_doctor(lab: Lab) -> None:
    """The Doctor tab: the doctor at the Lab's config within the budget box's seconds; its
    best can then be applied (:meth:`Lab.apply_best`) and the Overview names it."""
    d = doctor(
        lab.model,
        lab.config,
        budget_s=lab.tab_controls.budget.value,
        progress=lab.progress_for("doctor"),
        **lab.inputs(),
    )
    lab.doctor_result = d
    lab.tab_controls.apply_button.disabled = False
    lab.show(
        "Doctor",
        lab.tab_controls.doctor_bar,
        d,
        d.plot("candidates"),
        d.plot("threads"),
        d.plot("pareto"),
    )
    lab.show_when_seen("Overview", lab.overview)  # its headline names the best


LIMITS_INTRO = (
    "<div style='max-width:900px'>Is each node near what this machine can do? The <b>roofline</b> "
    "measures this machine's peaks with ORT under the current settings (a large GEMM per "
    "precision, streaming Adds) and sets each node's measured time against the FLOPs and bytes "
    "its shapes imply (<b>cost</b>: computed). <b>Throughput</b>: requests/s with 1, 2 and 4 at "
    "once. <b>Sweep</b>: latency, placement and memory per shape. <b>Versions</b>: the model "
    "under two onnxruntime versions, node by node (each installed once from PyPI).</div>"
)


def _sweep_dims(text: str) -> dict[str, list[int]]:
    """``batch=1,2,4; sequence=64,128`` as sweep dims (the one grammar, ``parse_dims``)."""
    dims = parse_dims(text, many=True)
    if not dims:
        raise OrtlabError("shapes: type the dims to sweep, e.g. batch=1,2,4; sequence=64,128.")
    return dims


def _perfetto(lab: Any) -> tuple[Path, list[Any]]:
    """The last run's profile as a Perfetto trace in the working directory (slices named after
    the model's nodes through the run's placement join), like the HTML report button."""
    if lab.placement is None or lab.placement.profile is None:
        raise OrtlabError("No run to export yet: press Run, then save its trace.")
    out = Path.cwd() / f"ortlab-trace-{safe_filename(lab.model.name)}.json"
    lab.placement.profile.to_perfetto(out, placement=lab.placement, model=lab.model)
    note = (
        f"<div>Perfetto trace of the last run written: <b>{esc(out)}</b> "
        f"({out.stat().st_size / 1e6:.1f} MB). Open it at ui.perfetto.dev or "
        "chrome://tracing (File: open trace file).</div>"
    )
    return out, [w.HTML(note)]


def limits_job(what: str, lab: Any) -> tuple[Any, list[Any]]:
    """Run one of the Limits tab's jobs at the Lab's settings and inputs: the result, and
    what the tab shows (its figure, then the result's own table: one home for each number).
    Each job runs the Model the run used (its own name in every title, not its file's stem)
    under the Lab's config: the cost counts the graph the roofline beside it times."""
    path, config, inputs = lab.current_model, lab.config, lab.inputs()
    progress = lab.progress_for(what)
    shapes, versions = lab.tab_controls.sweep_dims.value, lab.tab_controls.versions.value
    result: Any
    if what == "perfetto":
        return _perfetto(lab)
    if what == "roofline":
        result = roofline(path, config, runs=10, progress=progress, **inputs)
    elif what == "cost":
        result = cost(path, config, progress=progress, **inputs)
    elif what == "throughput":
        result = throughput(path, config, concurrency=[1, 2, 4], progress=progress, **inputs)
    elif what == "sweep":
        result = sweep(path, config, dims=_sweep_dims(shapes), progress=progress)
    else:
        pair = [v.strip() for v in versions.split(",") if v.strip()]
        if len(pair) != 2:
            raise OrtlabError(
                f"versions: give two onnxruntime versions, e.g. 1.31.1,1.32.0 (got {versions!r})."
            )
        result = version_diff(path, config, versions=pair, progress=progress, **inputs)
    return result, [result.plot(), result]


def run_generate(lab: Lab) -> None:
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
    lab.generation = g
    lab.hold_runs = True
    t.gen_nodes.options = generation_node_options(g)
    t.gen_nodes.value = None
    lab.hold_runs = False
    bench = [lab.llm_bench.plot(), lab.llm_bench] if lab.llm_bench is not None else []
    lab.show("Generate", t.gen_bar, *t.generate_items(g), *bench)
    lab.show_when_seen("Overview", lab.overview)  # its headline leads with the generation


def run_llm_bench(lab: Lab) -> None:
    """The Generate tab's matrix: llama-bench's pp and tg tests at the boxes' prompt and new
    tokens, at each depth in the depths box, 3 repetitions, at the Lab's settings; shown under
    the last generation (tg tokens/s against depth, the table, each cell by layer)."""
    t = lab.tab_controls
    try:
        depths = sorted({int(x) for x in t.bench_depths.value.replace(" ", "").split(",") if x})
    except ValueError as err:
        raise OrtlabError(
            f"depths: give token counts separated by commas, e.g. 0,256 (got "
            f"{t.bench_depths.value!r})."
        ) from err
    r = llm_bench(
        lab.current_model,
        lab.config,
        prompt=(t.gen_prompt.value,),
        new_tokens=(t.gen_new.value,),
        depth=depths or (0,),
        repetitions=3,
        progress=lab.progress_for("the matrix"),
    )
    lab.llm_bench = r
    shown = t.generate_items(lab.generation) if lab.generation is not None else []
    lab.show("Generate", t.gen_bar, r.plot(), r, *shown)


def run_limits(lab: Lab, what: str) -> None:
    """A Limits tab's button: ``what`` is the Lab's attribute its result replaces (roofline,
    cost, throughput, sweep, version_diff, perfetto)."""
    result, items = limits_job(what, lab)
    setattr(lab, what, result)
    lab.show("Limits", lab.tab_controls.limits_bar, *items)


def run_whatif(lab: Lab) -> None:
    """The chosen accelerator's predicted partition at the Lab's shapes (its compiler where
    one runs without the device), shown under the measured placement."""
    t = lab.tab_controls
    target = t.target.value
    w_ = whatif(
        lab.model,
        [target],
        progress=lab.progress_for(f"what if {target}"),
        qnn_options=t.qnn_options(),
        **lab.inputs(),
    )
    for old in lab.whatif_shown:  # a widget lives in the kernel until closed
        if isinstance(old, w.DOMWidget):
            old.close()
    lab.whatif_result = w_
    lab.whatif_shown = [w_, w_.reasons()]
    if w_.targets[0].evidence in ("compiled", "rules", "measured"):
        lab.whatif_shown.append(_graph(lab.model, w_[target]))
    measured = [lab.placement] if lab.placement is not None else []
    lab.show("Placement", t.whatif_bar, *measured, *lab.whatif_shown)


def compare_runs(lab: Lab) -> None:
    """History's "compare A and B": the two runs' table and where they disagree, then per
    node (``ortlab.diff`` of their placements) on the graph."""
    t = lab.tab_controls
    a, b = t.run_a.value, t.run_b.value
    if a is None or b is None:
        return
    items: list[Any] = lab.history.comparison(a, b)  # the table, and where it disagrees
    ra, rb = lab.history.run(a), lab.history.run(b)
    if ra.placement is not None and rb.placement is not None:  # per node, on the graph
        d = diff(ra.placement, rb.placement, labels=(f"run {a}", f"run {b}"))
        lab.run_diff = d
        same = ra.model_path == rb.model_path  # the model's own name, not its file's
        model = load(ra.model_path, name=lab.model.name) if same else lab.model
        items += [d, d.plot(), _graph(model, rb.placement, diff=d)]
    lab.shown["History comparison"] = items
    set_outputs(t.comparison_out, items)


def safe_filename(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]


def write_report(lab: Lab, path: str | os.PathLike[str] | None = None) -> Any:
    """The report button's job (:meth:`Lab.export_report`): the Lab's state as one HTML
    file, by default ``ortlab-report-<model>.html`` in the working directory."""
    lab.wait()  # a job in flight (the first run of a Lab) is in the report
    target = (
        Path(path) if path else Path.cwd() / f"ortlab-report-{safe_filename(lab.model.name)}.html"
    )
    out = report(
        lab.model,
        lab.doctor_result,
        path=target,
        compute=False,
        placement=lab.placement,
        profile=lab.profile_result,
        optimization=lab.optimization,
        compare=lab.comparison,
        benchmark=lab.benchmark_result,
        history=lab.history.to_pandas(),
        extra=[
            r
            for r in (
                lab.generation,
                lab.llm_bench,
                lab.roofline,
                lab.cost,
                lab.throughput,
                lab.sweep,
                lab.version_diff,
            )
            if r is not None
        ],
    )
    lab.report_path = out
    lab.notice.value = (
        f"report written: <a href='{esc(out.name)}' target='_blank'>"
        f"{esc(out)}</a> ({out.stat().st_size / 1e6:.1f} MB)"
    )
    return out


def show_snippet(lab: Lab, run: int | None = None) -> None:
    """Plain-onnxruntime Python for the current settings or for run ``run``: the model
    file that run used (an int8 run names the int8 file) and its settings."""
    if run is None:
        cfg, path, shapes = lab.config, str(lab.model_path), ""
        if lab.history.records and lab.history.records[-1].model_path == path:
            shapes = lab.history.records[-1].shapes
    else:
        record = lab.history.run(run)
        cfg, path, shapes = record.config, record.model_path, record.shapes
    code = cfg.snippet(path) + (f"\n# ortlab ran it with {shapes}" if shapes else "")
    title = "plain onnxruntime" + ("" if run is None else f" (run {run})")
    lab.notice.value = f"<b>{title}</b><pre>{esc(code, 20000)}</pre>"
