"""What a doctor stage returns and how ``doctor()`` folds it (onnx-ir's ``PassResult`` shape).

A stage is a function ``stage(ledger, got, out) -> Outcome``: it reads the ledger (the run, the
budget, the rows the stages before it returned) and :class:`Got` (the facts so far), and
returns its :class:`Outcome` — its facts (rows, the candidates, the observation, the footprint,
the trials…) and what it has to say (notes, failures, what the budget left out). ``doctor()``
folds each outcome in order (:meth:`Got.fold`); a stage can be run alone
(:func:`run_stage`), reordered or left out of the plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ortlab.analysis.memory import FootprintResult
from ortlab.analysis.profiling import ProfileResult
from ortlab.analysis.quantization.quantize import Calibration
from ortlab.analysis.quantization.variants import Signal
from ortlab.analysis.soak import SoakResult
from ortlab.diagnosis.budget import Said
from ortlab.diagnosis.facts import (
    CandidateFailure,
    CpuCosts,
    FixTried,
    Measured,
    Observed,
    TransformerFusion,
)
from ortlab.diagnosis.ledger import Item, Ledger

if TYPE_CHECKING:
    from ortlab.diagnosis.generationfacts import GenerationFacts

__all__ = ["Got", "Outcome", "Stage", "begin", "run_stage"]


@dataclass
class Outcome:
    """One stage's result: what it measured and what it has to say. Fields a stage does not
    produce stay None (or empty) and leave the facts so far as they were."""

    stage: str
    said: Said = field(default_factory=Said)
    """Its notes, its failed candidates and what the budget left out of it."""
    rows: dict[str, Measured] = field(default_factory=dict)
    """The candidates' rows it measured (new, or replacing an earlier stage's)."""
    items: list[Item] | None = None
    """The candidates after it (the built ones, the screened ones, with the fixes added)."""
    observed: Observed | None = None
    profile: ProfileResult | None = None
    """The baseline's profile (the observe stage's)."""
    footprint: FootprintResult | None = None
    soak: SoakResult | None = None
    fusion: TransformerFusion | None = None
    signals: list[Signal] | None = None
    """Why each slower model variant is slower."""
    generation: GenerationFacts | None = None
    cpu: CpuCosts | None = None
    quant_fixes: dict[str, FixTried] = field(default_factory=dict)
    samples: Calibration | None = None
    """The evaluation samples every output is computed on (the accuracy stage's)."""
    timing: tuple[int, int] | None = None
    """The screen's runs per measurement and rounds."""


Stage = Callable[[Ledger, "Got", Outcome], Outcome]


@dataclass
class Got:
    """The facts the stages so far returned, folded in order; what the result is made of."""

    seen: Observed
    items: list[Item] = field(default_factory=list)
    footprint: FootprintResult | None = None
    soak: SoakResult | None = None
    fusion: TransformerFusion = field(default_factory=TransformerFusion)
    signals: list[Signal] = field(default_factory=list)
    generation: GenerationFacts | None = None
    cpu: CpuCosts = field(default_factory=CpuCosts)
    quant_fixes: dict[str, FixTried] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    failures: list[CandidateFailure] = field(default_factory=list)

    def fold(self, out: Outcome, ledger: Ledger) -> None:
        """``out`` in: its facts here, its rows and what later stages read in the ledger."""
        ledger.measured.update(out.rows)
        if out.profile is not None:
            ledger.profile = out.profile
        if out.samples is not None:
            ledger.samples = out.samples
        if out.timing is not None:
            ledger.runs, ledger.rounds = out.timing
        if out.items is not None:
            self.items = out.items
        if out.observed is not None:
            self.seen = out.observed
        self.footprint = out.footprint or self.footprint
        self.soak = out.soak or self.soak
        self.fusion = out.fusion or self.fusion
        self.signals = out.signals if out.signals is not None else self.signals
        self.generation = out.generation or self.generation
        self.cpu = out.cpu or self.cpu
        self.quant_fixes.update(out.quant_fixes)
        self.notes += out.said.notes
        self.failures += out.said.failures


def begin(ledger: Ledger, name: str) -> Outcome:
    """A fresh outcome for stage ``name``: what the budget or a failed candidate says while
    it runs goes to it, not to another stage's."""
    out = Outcome(name)
    ledger.budget.said = out.said
    return out


def run_stage(stage: Stage, name: str, ledger: Ledger, got: Got) -> Outcome:
    """``stage`` alone, on a fresh outcome (:func:`begin`), returned; nothing folded."""
    return stage(ledger, got, begin(ledger, name))
