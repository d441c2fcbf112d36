"""The doctor's ledger: the state of one doctor run (the model, its feeds, the candidates'
measured rows, their latencies and outputs) and how a row is measured — timing plans that fit
the budget, interleaved timing with the baseline, the outputs of a candidate and their cosine
with the baseline's.

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

from ortlab.analysis.quantization.metrics import lowest_cosine
from ortlab.analysis.quantization.quantize import Calibration
from ortlab.core.config import SessionConfig
from ortlab.core.errors import OrtlabError
from ortlab.core.model import Model
from ortlab.core.run import Run
from ortlab.core.stats import MIN_ROUNDS, plan_rounds
from ortlab.diagnosis.budget import Budget, Said
from ortlab.diagnosis.facts import (
    Candidate,
    CandidateFailure,
    Measured,
    Observed,
    baseline_ms,
)
from ortlab.engine import tasks
from ortlab.engine.calls import Via, measure_interleaved
from ortlab.engine.calls import run as run_task
from ortlab.engine.tasks_timing import WARMUP_RUNS

__all__ = ["Item", "Ledger"]

Item = Candidate
T = TypeVar("T")


class Ledger:
    """What every stage of one doctor run reads (kept off the result: the run, the budget, the
    candidates' rows so far, their latencies and outputs, the evaluation samples) and the
    measuring the stages share. A stage writes none of it: it returns an
    :class:`~ortlab.diagnosis.stages.Outcome`, which ``doctor()`` folds in here in order (its
    rows, the baseline's profile, the screen's timing plan, the samples); what a stage has to
    say goes to :attr:`said`, that stage's own."""

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

    def _plan(self, n_items: int, seen: Observed, share: float, what: str) -> tuple[int, int]:
        """Runs per measurement and rounds (at most ``max_rounds``) that fit ``share`` of the
        remaining budget. Runs are cut before rounds, as a verdict needs MIN_ROUNDS rounds; when
        even the fewest runs leave fewer, ``what`` gets what fits (at least 2: one A B, one B A)
        and a note says its candidates get no verdict."""
        per_run = max(baseline_ms(seen, self.measured), 0.01) / 1e3
        build = seen.report.create_ms / 1e3 + WARMUP_RUNS * per_run  # each session warmed up
        available = max(self.left() * share - n_items * build, 0.0)
        runs, rounds = plan_rounds(n_items, per_run, available, self.max_rounds)
        if rounds < MIN_ROUNDS:
            spent = self.budget_s - self.left()
            needed = spent + n_items * (build + MIN_ROUNDS * runs * per_run) / share
            self.skip(
                f"verdicts in {what}: {max(self.left(), 0):.1f} s left had no room for "
                f"{MIN_ROUNDS} rounds, the fewest a 95 % verdict needs; it ran {rounds}, so its "
                "candidates get 'not enough rounds for a verdict'",
                needed,
            )
        return runs, rounds

    def _time(
        self, items: list[Item], rounds: int, runs: int, desc: str
    ) -> tuple[np.ndarray, list[Item]]:
        """Median ms per round (rows) and candidate (columns) of the candidates that ran, and
        those candidates. The ones the worker could not build or run (its ``failed``) are
        recorded as failures and left out."""
        out = measure_interleaved(
            [(mm, c) for _, mm, c, _ in items],
            self.run.with_(runs=runs, timeout=self.call_timeout()),
            rounds=rounds,
            desc=desc,
            context=f"of {self.m.name!r} ({len(items)} candidates)",
        )
        failed = out.failed
        if 0 in failed:  # the worker raises for the reference itself; never compare without it
            raise OrtlabError(f"The reference {items[0][0]!r} failed while timing: {failed[0]}")
        for k, msg in sorted(failed.items()):
            key, mm, c, _ = items[k]
            code = f"ortlab.benchmark(model, SessionConfig.from_json({c.to_json()!r}))"
            what = f"candidate {key} ({self._variant(mm)} · {c.label()})"
            self.said.failures.append(CandidateFailure(what, msg, "timing", code))
        ran = [k for k in range(len(items)) if k not in failed]
        med = out.medians_ms[:, ran]  # one column per item, NaN where one failed
        lat = [out.latencies_ns[k] for k in ran]
        kept = [items[k] for k in ran]
        for (key, *_), times in zip(kept, lat, strict=True):
            self.latencies.setdefault(key, []).extend(times)
        return med, kept

    def accurate(self, v: Measured) -> bool:
        """Output cosine >= min_cosine; NaN means the same model under other settings (not
        compared in the screen; the final combination is)."""
        return math.isnan(v.cosine) or v.cosine >= self.min_cosine

    def _variant(self, mm: Model) -> str:
        return "original" if mm is self.m else mm.name

    def _outputs(
        self, mm: Model, c: SessionConfig, samples: Calibration | None = None
    ) -> list[dict[str, np.ndarray]]:
        """``mm``'s outputs under ``c`` on ``samples`` (default: the accuracy stage's)."""
        out: list[dict[str, np.ndarray]] = run_task(
            tasks.outputs_many,
            Via(
                desc="doctor: outputs",
                context=f"of {mm.name!r}",
                progress=False,
                timeout=self.call_timeout(),
            ),
            model_path=str(mm.path),
            model_name=mm.name,
            config=c.with_(io_binding=False),
            samples=(samples or self.eval_samples()).samples,
            seeded=bool(self.m.random_ops),
        )
        return out

    def eval_samples(self) -> Calibration:
        """The accuracy stage's samples (a stage that computes outputs runs after it)."""
        if self.samples is None:
            raise OrtlabError("no evaluation samples: the accuracy stage has not run")
        return self.samples

    def _cosine(self, key: str) -> float:
        """The lowest output cosine of ``key`` against the baseline's outputs."""
        return lowest_cosine(self.outputs["baseline"], self.outputs[key])
