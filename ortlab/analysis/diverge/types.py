"""The records of a divergence search: the metrics and their defaults, a tensor's error on
both sides, a final output's, the first divergent node, a bisection's step, a tensor's producer
and what a repro is written from (:class:`ReproCase`). Nothing here measures."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ortlab.core.config import SessionConfig

__all__ = [
    "METRICS",
    "FinalError",
    "FirstDivergence",
    "Probe",
    "Producer",
    "ReproCase",
    "TensorDivergence",
    "metric_error",
    "relative_of",
]

METRICS = {"cosine": 1e-4, "max_abs": 1e-3, "relative": 1e-2}
"""Each metric and its default threshold: 1 - cosine, the largest absolute difference, and
the error's norm relative to the reference's."""


def relative_of(sqnr_db: float) -> float:
    """The relative error norm an SQNR stands for (0 when identical; 1 past a zero
    reference)."""
    return 10 ** (-sqnr_db / 20) if math.isfinite(sqnr_db) else float(sqnr_db < 0)


def metric_error(metric: str, cosine: float, max_abs: float, relative: float) -> float:
    """The error a metric reads: 1 - cosine, the largest absolute difference, or the relative
    norm."""
    if metric == "cosine":
        return 1.0 - cosine
    return max_abs if metric == "max_abs" else relative


@dataclass(frozen=True)
class FirstDivergence:
    """The earliest node whose own error passes the threshold."""

    node: str
    op_type: str
    tensor: str
    index: int
    error: float
    """Its output's error (the metric) in the whole run."""
    introduced: float
    """The error (the metric) of the node run alone on the reference's inputs."""
    inputs: list[str]
    other_tensor: str
    region: list[str] = field(default_factory=list)
    """The nodes run alone, in graph order, ``node`` last: it and the producers of its inputs
    the comparison did not see (an integer tensor: a QuantizeLinear's int8), up to tensors it
    did."""
    providers: tuple[str, str] = ("", "")
    """The EP that ran it on the reference's side and on the other's ('' where ORT did not
    say), its region built alone as each side's session builds it."""
    kernels: tuple[list[str], list[str]] = ([], [])
    """What each side's session made of the region ('OpType name' each): a fusion shows as
    fewer or other nodes; empty where an EP compiled it."""
    found_by: str = "exposed"
    """'exposed': its tensor passed the threshold with every tensor exposed; 'bisect': with
    only its tensor exposed (ORT fusing everywhere else as it runs), found by bisection."""


@dataclass(frozen=True)
class Probe:
    """One step of the bisection: ``tensor`` exposed alone (with the final outputs), its
    error (the metric) and the worst final output's in that same run."""

    tensor: str
    index: int
    error: float
    finals_error: float


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
class Producer:
    """A tensor's producer in the reference's graph: its place in graph order, its node,
    op type and inputs."""

    index: int
    node: str
    op_type: str
    inputs: list[str]


@dataclass(frozen=True)
class ReproCase:
    """What a reduced repro of the first divergence is written from: the node, its real
    inputs (the reference's values; empty for a result read back from JSON), the tensors the
    comparison saw, both sides' models and configs, the metric and its threshold."""

    first: FirstDivergence
    inputs: Mapping[str, object]
    compared: list[str]
    model: str
    reference: str
    other: str
    reference_path: str
    other_path: str
    reference_config: SessionConfig
    other_config: SessionConfig
    metric: str
    threshold: float
