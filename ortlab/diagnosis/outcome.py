"""What a doctor stage returns, and how ``doctor()`` folds it (onnx-ir's ``PassResult`` shape).

A stage is a function ``stage(run, budget, facts) -> Outcome``: it reads the doctor's
:class:`~ortlab.core.run.Run` (the model, its baseline config, the inputs every candidate runs
at), the budget left (a :class:`~ortlab.diagnosis.budget.StageBudget`, which hears what the
stage says) and the :class:`~ortlab.diagnosis.facts.Facts` so far, frozen; it returns the
facts with what it measured (``dataclasses.replace(facts, footprint=…)``) and what it said.
``doctor()`` folds each outcome in order (:meth:`Outcome.folded`); a stage can be run alone
(:func:`run_stage`), reordered or left out of the plan.

A new measurement is one field on :class:`~ortlab.diagnosis.facts.Facts` and one stage that
fills it (see ARCHITECTURE.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ortlab.core.run import Run
from ortlab.diagnosis.budget import Budget, StageBudget
from ortlab.diagnosis.facts import Facts, Said

__all__ = ["Outcome", "Stage", "outcome", "run_stage"]


@dataclass(frozen=True)
class Outcome:
    """One stage's result: the facts after it (what it measured, on top of what it read) and
    what it said (notes, failed candidates, what the budget left out of it)."""

    facts: Facts
    said: Said

    def folded(self) -> Facts:
        """The facts after this stage, with what it said after the other stages'."""
        return self.facts.heard(self.said)


Stage = Callable[[Run, StageBudget, Facts], Outcome]


def run_stage(stage: Stage, run: Run, budget: Budget, facts: Facts) -> Outcome:
    """``stage`` alone, on a budget of its own that has heard nothing yet; nothing folded."""
    return stage(run, budget.for_stage(), facts)


def outcome(budget: StageBudget, facts: Facts) -> Outcome:
    """A stage's outcome: ``facts`` and what the stage said while it ran."""
    return Outcome(facts, budget.said)
