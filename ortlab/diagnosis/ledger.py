"""The doctor's ledger: the state of one doctor run (the model, its feeds, the candidates'
measured rows, their latencies and outputs, the budget). How a row is measured — timing plans
that fit the budget, interleaved timing with the baseline, the outputs of a candidate and
their cosine with the baseline's — is :mod:`~ortlab.diagnosis.measure`'s, shared by the
stages.

The stages (:mod:`~ortlab.diagnosis.search`, and the final one,
:mod:`~ortlab.diagnosis.verify`) read it and return their rows, which ``doctor()`` folds in; a
candidate the worker cannot build or run while timing becomes a
:class:`~ortlab.diagnosis.facts.CandidateFailure` of the stage in flight, and the others go
on.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from ortlab.analysis.quantization.quantize import Calibration
from ortlab.core.errors import OrtlabError
from ortlab.core.run import Run
from ortlab.diagnosis.budget import Budget, Said
from ortlab.diagnosis.facts import (
    Candidate,
    CandidateFailure,
    Measured,
)

__all__ = ["Item", "Ledger"]

Item = Candidate
T = TypeVar("T")


class Ledger:
    """What every stage of one doctor run reads (kept off the result: the run, the budget, the
    candidates' rows so far, their latencies and outputs, the evaluation samples). A stage
    returns an :class:`~ortlab.diagnosis.stages.Outcome`, which ``doctor()`` folds in here in
    order (its rows, the baseline's profile, the screen's timing plan, the samples); the
    candidates' latencies and outputs are written as they are measured
    (:func:`~ortlab.diagnosis.measure.time_items`, the accuracy steps), so a later step of the
    same stage reads them; what a stage has to say goes to :attr:`said`, that stage's own."""

    def __init__(
        self,
        run: Run,
        *,
        budget_s: float,
        min_cosine: float,
        t0: float,
        max_rounds: int = 8,
    ) -> None:
        self.run = run
        """The doctor's model, its baseline config (fallback allowed), the inputs every
        candidate runs at, its progress and its per-call timeout."""
        self.m, self.cfg, self.feeds = run.model, run.config, run.inputs
        self.min_cosine = min_cosine
        self.progress = run.progress
        self.budget = Budget(budget_s, t0, run.timeout)
        self.max_rounds = max_rounds
        self.profile: Any = None
        """The baseline's ProfileResult (the observe stage's)."""
        self.rounds = 0
        self.runs = 3
        self.samples: Calibration | None = None
        """The evaluation samples every output is computed on (the accuracy stage's)."""
        self.outputs: dict[str, list[dict[str, np.ndarray]]] = {}
        self.latencies: dict[str, list[int]] = {}
        self.measured: dict[str, Measured] = {}
        """The candidates' rows the stages so far returned: the screen's, with cosines, then
        the final stage's."""

    # -- what the stage in flight says, and its budget --------------------------

    @property
    def said(self) -> Said:
        return self.budget.said

    @property
    def notes(self) -> list[str]:
        """The stage in flight's notes."""
        return self.budget.said.notes

    @property
    def failures(self) -> list[CandidateFailure]:
        """The stage in flight's failures."""
        return self.budget.said.failures

    @property
    def budget_s(self) -> float:
        return self.budget.budget_s

    def left(self) -> float:
        return self.budget.left()

    def call_timeout(self) -> float:
        return self.budget.call_timeout()

    def build_left(self) -> float:
        return self.budget.build_left()

    def build_timeout(self) -> float:
        return self.budget.build_timeout()

    def skip(self, what: str, need_s: float = 0.0) -> None:
        self.budget.skip(what, need_s)

    def guarded(self, what: str, stage: str, fn: Callable[[], T], code: str = "") -> T | None:
        return self.budget.guarded(what, stage, fn, code)

    def accurate(self, v: Measured) -> bool:
        """Output cosine >= min_cosine; NaN means the same model under other settings (not
        compared in the screen; the final combination is)."""
        return math.isnan(v.cosine) or v.cosine >= self.min_cosine

    def eval_samples(self) -> Calibration:
        """The accuracy stage's samples (a stage that computes outputs runs after it)."""
        if self.samples is None:
            raise OrtlabError("no evaluation samples: the accuracy stage has not run")
        return self.samples
