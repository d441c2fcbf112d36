"""Where two runs stop agreeing: every tensor both compute, in graph order, with its error; the
error each suspect node introduces by itself (the other side's node run alone on the
reference's inputs: the drift it inherits is not blamed on it); the first node whose own error
passes the threshold; and a reduced repro of it in plain onnxruntime.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from ortlab.analysis.divergefirst import (
    Checker,
    FirstDivergence,
    Probe,
    bisect,
    metric_error,
    relative_of,
)
from ortlab.analysis.divergematrix import MatrixCell, grid, matrix_verdict
from ortlab.analysis.divergerepro import write_repro
from ortlab.analysis.quantization.error import float_types
from ortlab.core.config import SessionConfig
from ortlab.core.errors import OptionError
from ortlab.core.graph import graph_nodes
from ortlab.core.model import Model, ModelLike, load
from ortlab.core.result import Result
from ortlab.engine import tasks_diverge
from ortlab.engine.calls import Reach, Via, edge
from ortlab.engine.calls import run as run_task
from ortlab.engine.errorsums import Side
from ortlab.engine.replies import TensorStats

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike

__all__ = [
    "METRICS",
    "DivergenceResult",
    "FinalError",
    "FirstDivergence",
    "TensorDivergence",
    "diverge",
]

METRICS = {"cosine": 1e-4, "max_abs": 1e-3, "relative": 1e-2}
"""Each metric and its default threshold: 1 - cosine, the largest absolute difference, and
the error's norm relative to the reference's."""
MAX_CHECKS = 8
"""Suspect nodes run alone, earliest first, before the search gives up naming one."""


@dataclass(frozen=True)
class TensorDivergence:
    """One tensor both sides compute: its producer in the reference's graph order and the
    other side's error against the reference (``introduced``: the producer's own, run alone
    on the reference's inputs, in the result's metric; NaN where it was not checked)."""

    index: int
    tensor: str
    node: str
    op_type: str
    cosine: float
    max_abs: float
    sqnr_db: float
    """The reference's power over the error's (dB; inf: identical): the graph's one scale of
    per-tensor error, as quantization's."""
    introduced: float = math.nan

    @property
    def relative(self) -> float:
        """The error's norm relative to the reference's."""
        return relative_of(self.sqnr_db)


@dataclass(frozen=True)
class FinalError:
    """A final output's error with the intermediate tensors exposed and with nothing exposed
    (the sessions as a user runs them)."""

    output: str
    exposed_cosine: float
    plain_cosine: float
    plain_max_abs: float
    plain_sqnr_db: float

    def plain_error(self, metric: str) -> float:
        """The output's error in ``metric`` as the sessions run (nothing exposed)."""
        return metric_error(
            metric, self.plain_cosine, self.plain_max_abs, relative_of(self.plain_sqnr_db)
        )


@dataclass(frozen=True)
class DivergenceResult(Result):
    """Per tensor in graph order, the other side's error; the final outputs' error with and
    without exposure; the first divergence (None when none reproduces); how many session runs
    it took. ``to_pandas()``: one row per tensor. ``save_repro(folder)``: the first divergent
    node as a plain-onnxruntime repro that exits 1 when it reproduces. ``plot()``: the error
    along the graph."""

    model: str
    reference: str
    other: str
    metric: str
    threshold: float
    tensors: list[TensorDivergence]
    finals: list[FinalError]
    first: FirstDivergence | None
    session_runs: int
    feeds: str
    synthetic: bool
    reference_path: str
    other_path: str
    reference_config: SessionConfig
    other_config: SessionConfig
    notes: list[str] = field(default_factory=list)
    matrix: list[MatrixCell] = field(default_factory=list)
    """With ``matrix=True``: the EP x level grid, each cell's final outputs against the
    reference cell (the first EPs at level disabled)."""
    matrix_verdict: str = ""
    """Which cells of the grid diverge, in words ('' without the grid)."""
    repro_inputs: dict[str, object] = field(default_factory=dict, repr=False, compare=False)
    """The first divergent node's real inputs (the reference's values), held in memory for
    :meth:`save_repro`; not written to JSON (a result read back cannot write a repro)."""
    probes: list[Probe] = field(default_factory=list)
    """The bisection's steps, when it ran: each tensor exposed alone and its error."""

    def to_dict(self) -> dict[str, object]:
        data = super().to_dict()
        data.pop("repro_inputs", None)
        return data

    def __repr__(self) -> str:
        """What was compared, the verdict and the counts (``to_pandas()``: every tensor)."""
        past = sum(1 for t in self.tensors if self.error(t) > self.threshold)
        if self.first is not None:
            verdict = (
                f"first divergent node {self.first.node!r} ({self.first.op_type}, "
                f"introduces {self.first.introduced:.3g})"
            )
        else:
            verdict = "no divergence that reproduces"
        grid = f", a grid of {len(self.matrix)} cells" if self.matrix else ""
        return (
            f"<DivergenceResult: {self.reference} vs {self.other}, {self.metric} error > "
            f"{self.threshold:g}: {verdict}; {len(self.tensors)} tensors "
            f"compared, {past} past the threshold; {self.session_runs} session runs{grid}>"
        )

    def error(self, t: TensorDivergence) -> float:
        """``t``'s error in this result's metric."""
        return metric_error(self.metric, t.cosine, t.max_abs, t.relative)

    def to_pandas(self) -> pd.DataFrame:
        """One row per tensor in graph order: index, tensor, node, op_type, cosine, max_abs,
        sqnr_db, relative, error (the metric), introduced (the node alone; NaN: not
        checked), first."""
        import pandas as pd

        cols = ["index", "tensor", "node", "op_type", "cosine", "max_abs", "sqnr_db", "relative"]
        rows = [[getattr(t, c) for c in cols] + [self.error(t), t.introduced] for t in self.tensors]
        frame = pd.DataFrame(rows, columns=[*cols, "error", "introduced"])
        frame["first"] = frame["tensor"] == (self.first.tensor if self.first else None)
        return frame

    def save_repro(self, folder: str | Path) -> Path:
        """Write the first divergent node as a reduced repro: ``reference.onnx`` and
        ``other.onnx`` (that node alone, from each side's model), ``inputs.npz`` (its real
        inputs, from the reference run) and ``repro.py``, plain onnxruntime, which prints the
        metric and exits 1 when the divergence reproduces, 0 when it does not. Returns the
        script's path."""
        if self.first is None:
            raise OptionError(
                "No divergence to reduce: this result found none that reproduces "
                "(see its notes). Nothing was written."
            )
        return write_repro(self, Path(folder))


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
    and all (:mod:`ortlab.analysis.divergematrix`) and says which cells diverge (with the
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


@dataclass(frozen=True)
class _Producer:
    index: int
    node: str
    op_type: str
    inputs: list[str]


def _producers(m: Model) -> dict[str, _Producer]:
    """Each tensor a top-level node computes -> its node, in graph order."""
    out: dict[str, _Producer] = {}
    for k, n in enumerate(graph_nodes(m.proto.graph)):
        for t in n.outputs:
            if t:
                out[t] = _Producer(k, n.name, n.op_type, [i for i in n.inputs if i])
    return out


def _row(p: _Producer, tensor: str, s: TensorStats) -> TensorDivergence:
    return TensorDivergence(p.index, tensor, p.node, p.op_type, s.cosine, s.max_abs, s.sqnr_db)


def _final(output: str, exposed: TensorStats | None, plain: TensorStats) -> FinalError:
    seen = math.nan if exposed is None else exposed.cosine
    return FinalError(output, seen, plain.cosine, plain.max_abs, plain.sqnr_db)


def _find_first(
    result: DivergenceResult,
    other: Model,
    feeds: Mapping[str, np.ndarray],
    producers: dict[str, _Producer],
    *,
    timeout: float | None,
) -> DivergenceResult:
    """The earliest suspect (a tensor past the threshold) whose node introduces the error
    itself, checked alone, at most MAX_CHECKS; when none does and the sessions as they run
    diverge, the bisection (:mod:`ortlab.analysis.divergebisect`); and the notes on what
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
