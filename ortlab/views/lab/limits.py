"""The Limits tab's jobs, one table: each row is the state field its result replaces, its
button's label, how its tab's status line names it, and the call (``LIMITS_JOBS``). A new
Limits job is one row here and one function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import ipywidgets as w

from ortlab.analysis.limits.cost import cost
from ortlab.analysis.limits.roofline import roofline
from ortlab.analysis.sweep import sweep
from ortlab.analysis.throughput import throughput
from ortlab.analysis.versions import version_diff
from ortlab.core.errors import OrtlabError
from ortlab.core.grammar import parse_dims, version_pair
from ortlab.core.result import Result
from ortlab.views.html import esc
from ortlab.views.lab.host import LabHost

if TYPE_CHECKING:
    from ortlab.core.model import Model

__all__ = ["LIMITS_INTRO", "LIMITS_JOBS", "LimitsJob", "safe_filename", "sweep_example"]

LIMITS_INTRO = (
    "<div style='max-width:900px'>Is each node near what this machine can do? The <b>roofline</b> "
    "measures this machine's peaks with ORT under the current settings (a large GEMM per "
    "precision, streaming Adds) and sets each node's measured time against the FLOPs and bytes "
    "its shapes imply (<b>cost</b>: computed). <b>Throughput</b>: requests/s with 1, 2 and 4 at "
    "once. <b>Sweep</b>: latency, placement and memory per shape. <b>Versions</b>: the model "
    "under two onnxruntime versions, node by node (each installed once from PyPI).</div>"
)

Shown = tuple[Result | Path, list[object]]
"""A job's result (a Perfetto trace's file) and what the tab shows of it."""


@dataclass(frozen=True)
class LimitsJob:
    """One Limits job: its button's ``label``, its ``status`` (as the tab's status line names
    it) and its ``call`` (the Lab's model, config and inputs: the result, what the tab shows:
    its figure, then the result's own table, one home for each number)."""

    label: str
    status: str
    call: Callable[[LabHost], Shown]


def safe_filename(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]


def _shown(result: Result) -> Shown:
    return result, [result.plot(), result]


def _roofline(lab: LabHost) -> Shown:
    p = lab.progress_for("roofline")
    return _shown(roofline(lab.current_model, lab.config, runs=10, progress=p, **lab.inputs()))


def _cost(lab: LabHost) -> Shown:
    p = lab.progress_for("cost")
    return _shown(cost(lab.current_model, lab.config, progress=p, **lab.inputs()))


def _throughput(lab: LabHost) -> Shown:
    p, inputs = lab.progress_for("throughput"), lab.inputs()
    return _shown(
        throughput(lab.current_model, lab.config, concurrency=[1, 2, 4], progress=p, **inputs)
    )


def sweep_example(m: Model, dims: Mapping[str, int]) -> str:
    """The shapes box's example, in the model's own terms: a decoder's roles (prompt, batch),
    else two of its symbolic dims at their value now and twice it; '' when every dim is fixed."""
    if m.decoder is not None and not m.decoder.seq2seq:
        return "prompt=64,128; batch=1,2"
    names = sorted(dims)[:2]
    return "; ".join(f"{n}={max(1, dims[n])},{2 * max(1, dims[n])}" for n in names)


def _sweep(lab: LabHost) -> Shown:
    """``batch=1,2,4; sequence=64,128`` in the shapes box, as sweep dims (the one grammar)."""
    box = lab.tab_controls.sweep_dims
    dims = parse_dims(box.value, many=True)
    if not dims:
        example = box.placeholder or "no dim of this model is symbolic: nothing to sweep"
        raise OrtlabError(f"shapes: type the dims to sweep, e.g. {example}.")
    p = lab.progress_for("sweep")
    return _shown(sweep(lab.current_model, lab.config, dims=dims, progress=p))


def _versions(lab: LabHost) -> Shown:
    pair = version_pair(lab.tab_controls.versions.value)
    p, inputs = lab.progress_for("version_diff"), lab.inputs()
    return _shown(version_diff(lab.current_model, lab.config, versions=pair, progress=p, **inputs))


def _perfetto(lab: LabHost) -> Shown:
    """The last run's profile as a Perfetto trace in the working directory (slices named after
    the model's nodes through the run's placement join), like the HTML report button."""
    placement = lab.state.placement
    if placement is None or placement.profile is None:
        raise OrtlabError("No run to export yet: press Run, then save its trace.")
    out = Path.cwd() / f"ortlab-trace-{safe_filename(lab.model.name)}.json"
    placement.to_perfetto(out, model=lab.model)
    note = (
        f"<div>Perfetto trace of the last run written: <b>{esc(out)}</b> "
        f"({out.stat().st_size / 1e6:.1f} MB). Open it at ui.perfetto.dev or "
        "chrome://tracing (File: open trace file).</div>"
    )
    return out, [w.HTML(note)]


LIMITS_JOBS = {
    "roofline": LimitsJob(
        "Roofline: nodes against this machine's peaks", "the roofline", _roofline
    ),
    "cost": LimitsJob("Cost: the work per node", "the cost", _cost),
    "throughput": LimitsJob("Throughput at 1, 2, 4 requests", "the throughput", _throughput),
    "sweep": LimitsJob("Sweep these shapes", "the shape sweep", _sweep),
    "version_diff": LimitsJob(
        "Compare these onnxruntime versions, node by node", "the version comparison", _versions
    ),
    "perfetto": LimitsJob("Perfetto trace of the last run", "the Perfetto trace", _perfetto),
}
"""The Limits tab's jobs by the :class:`~ortlab.views.lab.state.LabState` field each fills."""
