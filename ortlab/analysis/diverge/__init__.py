"""Where two runs stop agreeing (``ortlab.diverge``): ``compare`` the verb, ``types`` its
records, ``result`` the result, ``first`` the search for the first divergent node (suspects
alone, then the bisection), ``repro`` the reduced repro in plain onnxruntime, ``matrix`` the
EP x level grid."""

from ortlab.analysis.diverge.compare import diverge
from ortlab.analysis.diverge.result import DivergenceResult
from ortlab.analysis.diverge.types import METRICS, FinalError, FirstDivergence, TensorDivergence

__all__ = [
    "METRICS",
    "DivergenceResult",
    "FinalError",
    "FirstDivergence",
    "TensorDivergence",
    "diverge",
]
