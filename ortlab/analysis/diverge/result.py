"""``ortlab.diverge``'s result: per tensor the other side's error, the final outputs' error
with and without exposure, the first divergent node and how it was found; a repro of it in
plain onnxruntime (``save_repro``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ortlab.analysis.diverge.matrix import MatrixCell
from ortlab.analysis.diverge.repro import write_repro
from ortlab.analysis.diverge.types import (
    FinalError,
    FirstDivergence,
    Probe,
    ReproCase,
    TensorDivergence,
    metric_error,
)
from ortlab.core.config import SessionConfig
from ortlab.core.errors import OptionError
from ortlab.core.result import Result

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DivergenceResult"]


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
        case = ReproCase(
            first=self.first,
            inputs=self.repro_inputs,
            compared=[t.tensor for t in self.tensors],
            model=self.model,
            reference=self.reference,
            other=self.other,
            reference_path=self.reference_path,
            other_path=self.other_path,
            reference_config=self.reference_config,
            other_config=self.other_config,
            metric=self.metric,
            threshold=self.threshold,
        )
        return write_repro(case, Path(folder))
