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

from ortlab.analysis.compare import compare
from ortlab.analysis.diff import diff
from ortlab.analysis.graphdata import graph_data
from ortlab.analysis.optimization import optimization_diff
from ortlab.analysis.quant_error import quantization_error
from ortlab.analysis.quantization import quantize, to_fp16
from ortlab.analysis.whatif import whatif
from ortlab.core.model import load
from ortlab.diagnosis.doctor import doctor
from ortlab.views.html import esc
from ortlab.views.report import report
from ortlab.views.widgets.labparts import limits_job, safe_filename, set_outputs

if TYPE_CHECKING:
    from ortlab.views.widgets.lab import Lab

__all__ = [
    "compare_runs",
    "run_doctor",
    "run_limits",
    "run_optimization",
    "run_quantization",
    "run_whatif",
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
        progress=lab._progress("levels"),
        **lab._inputs(),
    )
    lab.optimization = opt
    lab._show("Optimization", lab.tab_controls.opt_bar, opt, opt.plot(), opt.counts.T)


def run_quantization(lab: Lab) -> None:
    """The Quantization tab: fp16, dynamic int8 and static QDQ timed against the model, and
    the static variant's per-tensor error."""
    m, inputs = lab.model, lab._inputs()
    lab._announce("building fp16")  # said on the tab: this takes a while, silently
    variants = [to_fp16(m)]
    lab._announce("building dynamic int8")
    variants.append(quantize(m, mode="dynamic"))
    lab._announce("building static QDQ (calibration)")
    variants.append(quantize(m, mode="static", calibration_size=8, **inputs))
    lab._announce("timing the variants")
    cmp = compare(m, variants, lab.config, progress=lab._progress("variants"), **inputs)
    lab._announce("the per-tensor error")
    err = quantization_error(m, variants[2], **inputs)  # at the timed shapes
    lab.comparison = cmp
    lab._show(
        "Quantization",
        lab.tab_controls.quant_bar,
        cmp,
        cmp.plot(),
        lab.tab_controls.worst_label,
        err.worst(10),
    )


def run_doctor(lab: Lab) -> None:
    """The Doctor tab: the doctor at the Lab's config within the budget box's seconds; its
    best can then be applied (:meth:`Lab.apply_best`) and the Overview names it."""
    d = doctor(
        lab.model,
        lab.config,
        budget_s=lab.tab_controls.budget.value,
        progress=lab._progress("doctor"),
        **lab._inputs(),
    )
    lab.doctor_result = d
    lab.tab_controls.apply_button.disabled = False
    lab._show(
        "Doctor",
        lab.tab_controls.doctor_bar,
        d,
        d.plot("candidates"),
        d.plot("threads"),
        d.plot("pareto"),
    )
    lab._show_when_seen("Overview", lab._overview)  # its headline names the best


def run_limits(lab: Lab, what: str) -> None:
    """A Limits tab's button: ``what`` is the Lab's attribute its result replaces (roofline,
    cost, throughput, sweep, version_diff, perfetto)."""
    result, items = limits_job(what, lab)
    setattr(lab, what, result)
    lab._show("Limits", lab.tab_controls.limits_bar, *items)


def run_whatif(lab: Lab) -> None:
    """The chosen accelerator's predicted partition at the Lab's shapes (its compiler where
    one runs without the device), shown under the measured placement."""
    t = lab.tab_controls
    target = t.target.value
    w_ = whatif(
        lab.model,
        [target],
        progress=lab._progress(f"what if {target}"),
        qnn_options=t.qnn_options(),
        **lab._inputs(),
    )
    for old in lab._whatif_shown:  # a widget lives in the kernel until closed
        if isinstance(old, w.DOMWidget):
            old.close()
    lab.whatif_result = w_
    lab._whatif_shown = [w_, w_.reasons()]
    if w_.targets[0].evidence in ("compiled", "rules", "measured"):
        lab._whatif_shown.append(_graph(lab.model, w_[target]))
    measured = [lab.placement] if lab.placement is not None else []
    lab._show("Placement", t.whatif_bar, *measured, *lab._whatif_shown)


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
            for r in (lab.roofline, lab.cost, lab.throughput, lab.sweep, lab.version_diff)
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
