"""``ortlab.diverge``, where two runs stop agreeing: every tensor both compute, in graph
order, with its error; the error each suspect node introduces by itself (the other side's
node run alone on the reference's inputs: the drift it inherits is not blamed on it); the
first node whose own error passes the threshold; and a reduced repro of it in plain
onnxruntime.

The other side is another session config of the same model (``{"level": "disabled"}``,
``{"providers": ["openvino", "cpu"]}``) or another model (an fp16 or int8 variant, an edited
copy); tensors pair by name. Exposing intermediate tensors as outputs changes what ORT fuses,
so the final outputs are compared once more with nothing exposed: a divergence the unmodified
sessions do not show is never reported as found.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Unpack

from ortlab.analysis.diverge.first import Checker, bisect
from ortlab.analysis.diverge.matrix import grid, matrix_verdict
from ortlab.analysis.diverge.result import DivergenceResult
from ortlab.analysis.diverge.types import (
    METRICS,
    FinalError,
    Probe,
    Producer,
    TensorDivergence,
    metric_error,
)
from ortlab.analysis.quantization.error import float_types
from ortlab.core.config import SessionConfig
from ortlab.core.errors import OptionError
from ortlab.core.graph import graph_nodes
from ortlab.core.model import Model, ModelLike, load
from ortlab.engine import tasks_diverge
from ortlab.engine.calls import Reach, Via, edge
from ortlab.engine.calls import run as run_task
from ortlab.engine.errorsums import Side
from ortlab.engine.replies import TensorStats

if TYPE_CHECKING:
    import numpy as np

    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike

__all__ = ["MAX_CHECKS", "diverge"]

MAX_CHECKS = 8
"""Suspect nodes run alone, earliest first, before the search gives up naming one."""


def diverge(
    model: ModelLike,
    against: ModelLike | ConfigLike,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    metric: str = "cosine",
    threshold: float | None = None,
    matrix: bool = False,
    **reach: Unpack[Reach],
) -> DivergenceResult:
    """Where ``model`` under ``config`` and ``against`` stop agreeing on the same inputs.

    ``against``: a session config (a dict of the fields that change — ``{"level":
    "disabled"}`` — or a SessionConfig) of the same model, or another model (a variant) under
    ``config``. ``metric``: 'cosine' (1 - cosine), 'max_abs' or 'relative'; ``threshold``: the
    error a node must introduce to be the first divergence (default per metric:
    :data:`METRICS`). ``matrix=True`` also runs the grid of both sides' EPs x levels disabled
    and all (:mod:`ortlab.analysis.diverge.matrix`) and says which cells diverge (with the
    relative metric, a cell is read by its cosine).

    ``dims``, ``progress`` and ``timeout`` as every verb takes them (:class:`Reach`).
    """
    if metric not in METRICS:
        raise OptionError(
            f"metric={metric!r}: choose one of {', '.join(map(repr, METRICS))} (1 - cosine, "
            "the largest absolute difference, the relative error norm)."
        )
    limit = METRICS[metric] if threshold is None else float(threshold)
    run = edge(model, config, feeds, **reach)
    m, cfg = run.model, run.config
    other, other_cfg = _other_side(m, cfg, against)
    producers = _producers(m)
    floats = float_types(m)
    others = {t for n in graph_nodes(other.proto.graph) for t in n.outputs if t}
    pairs = {t: t for t in producers if t in others and floats.get(t, True)}
    outputs = [o.name for o in m.proto.graph.output]
    other_outputs = [o.name for o in other.proto.graph.output]
    finals = dict(zip(outputs, other_outputs, strict=False))
    reference = Side(str(m.path), cfg, "the reference")
    side = Side(str(other.path), other_cfg, "the other side")
    reply = run_task(
        tasks_diverge.diverge_errors,
        Via(desc="diverge", context=f"of {m.name!r}", progress=run.progress, timeout=run.timeout),
        reference=reference,
        other=side,
        pairs=pairs,
        finals=finals,
        feeds=dict(run.inputs),
    )
    rows = [_row(producers[t], t, s) for t, s in reply.tensors.items()]
    rows.sort(key=lambda r: r.index)
    result = DivergenceResult(
        model=m.name,
        reference=f"{m.name} · {cfg.label()}",
        other=f"{other.name} · {other_cfg.label()}",
        metric=metric,
        threshold=limit,
        tensors=rows,
        finals=[_final(o, reply.tensors.get(o), s) for o, s in reply.finals.items()],
        first=None,
        session_runs=reply.session_runs,
        feeds=run.inputs.describe(),
        synthetic=bool(run.inputs.synthetic),
        reference_path=str(m.path),
        other_path=str(other.path),
        reference_config=cfg,
        other_config=other_cfg,
    )
    if matrix:
        cells = grid(
            (str(m.path), str(other.path)),
            [cfg, other_cfg],
            finals,
            run.inputs,
            error=lambda cos, worst: metric_error(metric, cos, worst, 1.0 - cos),
            threshold=limit,
            timeout=run.timeout,
        )
        result = dataclasses.replace(result, matrix=cells, matrix_verdict=matrix_verdict(cells))
    return _find_first(result, other, dict(run.inputs), producers, timeout=run.timeout)


def _other_side(
    m: Model, cfg: SessionConfig, against: ModelLike | ConfigLike
) -> tuple[Model, SessionConfig]:
    if isinstance(against, SessionConfig):
        return m, against
    if isinstance(against, Mapping):
        return m, cfg.with_(**dict(against))
    return load(against), cfg


def _producers(m: Model) -> dict[str, Producer]:
    """Each tensor a top-level node computes -> its node, in graph order."""
    out: dict[str, Producer] = {}
    for k, n in enumerate(graph_nodes(m.proto.graph)):
        for t in n.outputs:
            if t:
                out[t] = Producer(k, n.name, n.op_type, [i for i in n.inputs if i])
    return out


def _row(p: Producer, tensor: str, s: TensorStats) -> TensorDivergence:
    return TensorDivergence(p.index, tensor, p.node, p.op_type, s.cosine, s.max_abs, s.sqnr_db)


def _final(output: str, exposed: TensorStats | None, plain: TensorStats) -> FinalError:
    seen = math.nan if exposed is None else exposed.cosine
    return FinalError(output, seen, plain.cosine, plain.max_abs, plain.sqnr_db)


def _find_first(
    result: DivergenceResult,
    other: Model,
    feeds: Mapping[str, np.ndarray],
    producers: dict[str, Producer],
    *,
    timeout: float | None,
) -> DivergenceResult:
    """The earliest suspect (a tensor past the threshold) whose node introduces the error
    itself, checked alone, at most MAX_CHECKS; when none does and the sessions as they run
    diverge, the bisection (:func:`ortlab.analysis.diverge.first.bisect`); and the notes on what
    could not be said."""
    notes = list(result.notes)
    plain = [f.plain_error(result.metric) for f in result.finals]
    shows = any(e > result.threshold for e in plain if not math.isnan(e))
    exposed = [f for f in result.finals if abs(f.exposed_cosine - f.plain_cosine) > 1e-6]
    if exposed:
        notes.append(
            "exposing the intermediate tensors changed the final outputs' error ("
            + "; ".join(
                f"{f.output}: cosine {f.plain_cosine:.6f} as run, {f.exposed_cosine:.6f} exposed"
                for f in exposed[:3]
            )
            + "): ORT fuses differently when a tensor must be kept, so the per-tensor errors "
            "describe the exposed sessions"
        )
    suspects = [t for t in result.tensors if result.error(t) > result.threshold]
    if not shows:
        notes.append(
            "the final outputs agree within the threshold when nothing is exposed (the "
            "sessions as they run): no divergence is reported"
            + (f", though {len(suspects)} exposed tensors differ" if suspects else "")
        )
        return dataclasses.replace(result, notes=notes)
    check = Checker(result, other, feeds, timeout=timeout)
    checked: dict[str, float] = {}
    found = None
    for t in suspects[:MAX_CHECKS]:
        found = check.alone(t, producers[t.tensor])
        checked[t.tensor] = found.introduced if found else check.last
        if found is not None:
            break
    probes: list[Probe] = []
    if found is None:
        notes.append(
            f"none of the first {len(checked)} tensors past the threshold with all exposed is "
            "produced by a node that diverges alone on the reference's inputs"
            if checked
            else "no tensor passes the threshold with all exposed, yet the outputs as run do"
        )
        found, probes, said = bisect(check, producers)
        notes.append(said)
    tensors = [
        dataclasses.replace(t, introduced=checked[t.tensor]) if t.tensor in checked else t
        for t in result.tensors
    ]
    return dataclasses.replace(
        result,
        tensors=tensors,
        first=found,
        session_runs=check.runs,
        notes=notes,
        repro_inputs=dict(check.saved) if found else {},
        probes=probes,
    )
