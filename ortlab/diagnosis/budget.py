"""The doctor's time budget: what is left, each worker call's limit, each stage's share, and
how a call cut short by the budget is said (a note to raise ``budget_s``, not a tool failure).

Stages share the budget so that timing the candidates, the doctor's first job, always has
time: building variants may take until half of it has passed, the memory stage 40 %
(every fresh process it starts loads the model). Piper's 63 MB voice showed why: its memory
stage took 31 s of a 30 s budget and then its static quantization 25 s, and the screen was
cut off after 2 s.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ortlab.core.errors import (
    OrtlabError,
    WorkerCancelledError,
    WorkerTimeoutError,
    failure_text,
)
from ortlab.core.stats import MIN_ROUNDS
from ortlab.diagnosis.facts import Candidate, CandidateFailure, Kind, Said

__all__ = [
    "BUDGET_SLACK",
    "BUILD_SHARE",
    "Budget",
    "BudgetSpentError",
    "StageBudget",
    "fit_screen",
    "memory_need_s",
    "memory_plan",
]

T = TypeVar("T")
BUDGET_SLACK = 0.2
"""A call may run this fraction of the budget past it (the doctor's promise: budget + 25 %)."""
BUILD_SHARE = 0.5
"""Building model variants (quantizing, the transformers optimizer) may go on until this share
of the budget has passed; what is not built by then is skipped and said."""
MEMORY_REPEATS = 4
"""Fresh processes per memory setting: the fewest that give a 95 % interval (97 %)."""
MEMORY_SHARE = 0.4
"""The most of the budget the memory stage may plan to take (16 processes of a small model
take ~11 s: they fit a 30 s budget)."""
FRESH_PROCESS_S = 0.6
"""A fresh Python's start with ortlab's child and onnxruntime imported, on this kind of
machine (0.53 s measured on 2 EPYC cores): the measuring process each repeat starts."""
FORKED_CHILD_S = 0.05
"""A measurement's own process, forked by the measuring process, its file pages mapped in
again (under 0.05 s on 2 Xeon cores): added to its session build and runs. Where the worker
cannot fork it starts a fresh Python per measurement instead, and the plan reads low."""


class BudgetSpentError(OrtlabError):
    """The budget and its slack are spent: no further worker call starts (each would get a
    few seconds and a worker restart, past the promised budget + 25 %)."""


MIN_CALL_S = 1.0
"""A call with less than this left before the hard deadline (budget + slack) is not started."""


def memory_plan(settings: int, init_s: float, run_s: float, budget_s: float) -> str:
    """'' when the memory stage (``settings`` configs, MEMORY_REPEATS fresh processes each,
    each building the session in ``init_s`` and running it 3 times) fits its share of the
    budget; else what says why it was not measured and how to get it."""
    each = FORKED_CHILD_S + init_s + 3 * run_s
    planned = memory_need_s(settings, init_s, run_s) * MEMORY_SHARE
    if planned <= MEMORY_SHARE * budget_s:
        return ""
    return (
        f"the memory footprint was not measured: {settings} settings in {MEMORY_REPEATS} fresh "
        f"processes each (the fewest for a 95 % interval) take about {planned:.0f} s here (each "
        f"process builds the session: {each:.1f} s), more than {MEMORY_SHARE:.0%} of the "
        f"budget (it fits {planned / MEMORY_SHARE:.0f} s); run ortlab.footprint(model) on its own"
    )


def memory_need_s(settings: int, init_s: float, run_s: float) -> float:
    """The budget whose memory share fits the memory stage (see :func:`memory_plan`)."""
    each = FORKED_CHILD_S + init_s + 3 * run_s
    return (FRESH_PROCESS_S + each * settings) * MEMORY_REPEATS / MEMORY_SHARE


_SCREEN_PRIORITY = {
    Kind.BASELINE: 0,
    Kind.LEVEL: 1,
    Kind.VARIANT: 2,
    Kind.THREADS: 3,
    Kind.CPU_ONLY: 4,
    Kind.CUDA_GRAPH: 4,
    Kind.IOBINDING: 5,
    Kind.SPIN: 6,
    Kind.MEMORY: 7,
}
"""Which candidates the screen keeps first when not all fit: the fixes that change the most
(level 'all', which the variants are compared with, then the model variants) before the
thread sweep, IO binding, spinning and the memory settings (a saving, not a speed-up)."""


def fit_screen(
    items: Sequence[Candidate], per_run_s: float, build_s: float, available_s: float, floor: int
) -> list[Candidate]:
    """The candidates (baseline first) that get MIN_ROUNDS rounds of ``floor`` runs each in
    ``available_s``, each session built in ``build_s``: all of them when they fit, else the
    first by :data:`_SCREEN_PRIORITY` (level 'all' before the other levels), in their order.
    When not even the baseline and one candidate fit, all of them (their verdicts then say
    'not enough rounds', and a note says why)."""
    each = build_s + MIN_ROUNDS * floor * per_run_s
    n = int(available_s / max(each, 1e-9))
    if n >= len(items) or n < 2:
        return list(items)

    def rank(k: int) -> tuple[int, int]:
        c = items[k].parsed
        return (_SCREEN_PRIORITY.get(c.kind, 8) - (c.kind is Kind.LEVEL and c.arg == "all"), k)

    keep = set(sorted(range(len(items)), key=rank)[:n]) | {0}
    return [it for k, it in enumerate(items) if k in keep]


@dataclass(frozen=True)
class Budget:
    """The doctor's time: ``budget_s`` from ``t0``, the caller's own ``timeout`` per call, and
    the most interleaved rounds a stage plans (``max_rounds``). Frozen: each stage gets its
    own :class:`StageBudget` over it (:meth:`for_stage`), which hears what it says."""

    budget_s: float
    t0: float
    timeout: float | None = None
    max_rounds: int = 8

    def for_stage(self) -> StageBudget:
        """This budget as a stage spends it, with nothing said yet."""
        return StageBudget(self)

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.t0)

    def call_timeout(self) -> float:
        """One worker call's limit: what is left of the budget plus a fifth of it, so the doctor
        ends within its budget + 25 % whatever one call does (a call the budget cut short is a
        note, and the doctor goes on with what it measured); the caller's own ``timeout`` when
        that is smaller. Raises BudgetSpentError when less than MIN_CALL_S is left."""
        limit = self.left() + BUDGET_SLACK * self.budget_s
        if limit < MIN_CALL_S:  # a 2 s call then and a worker restart broke the promise
            raise BudgetSpentError(
                f"the budget ({self.budget_s:g} s + {BUDGET_SLACK:.0%}) was spent: raise budget_s"
            )
        return limit if self.timeout is None else min(limit, self.timeout)

    def cut_short(self, err: WorkerTimeoutError) -> bool:
        """Whether the doctor's budget stopped the call (a note: raise budget_s), not the
        caller's own ``timeout`` (a failure: the model may hang ORT): the limit the call ran
        under was the budget's, below the caller's. A limit not known, under a caller's
        timeout, is taken for the caller's."""
        if self.timeout is None:
            return True
        return err.timeout_s is not None and err.timeout_s < self.timeout

    def build_left(self) -> float:
        """Seconds left for building variants (until BUILD_SHARE of the budget has passed)."""
        return BUILD_SHARE * self.budget_s - (time.perf_counter() - self.t0)

    def build_timeout(self) -> float:
        """A variant build's limit: what is left of the building share (at least 2 s, and
        never past the call limit)."""
        return min(max(self.build_left(), 2.0), self.call_timeout())

    def left_out(self, said: Said) -> str:
        """One note for everything the budget left out (``said.skipped``, every stage's), and
        the budget that fits it ('' when nothing was left out)."""
        if not said.skipped:
            return ""
        to = f" to about {math.ceil(said.need_s)} s" if said.need_s > self.budget_s else ""
        return (
            "; ".join(said.skipped)
            + f" — left out by the {self.budget_s:g} s budget: raise budget_s{to} to measure them"
        )


@dataclass
class StageBudget:
    """The budget as one stage spends it: the doctor's :class:`Budget` and what the stage says
    while it runs (:attr:`said`: its notes, the candidates that failed, what the budget left
    out of it), which goes into its outcome — and, when the stage ends in an error, is still
    kept with what the stages before it measured."""

    budget: Budget
    said: Said = field(default_factory=Said)

    @property
    def budget_s(self) -> float:
        return self.budget.budget_s

    @property
    def max_rounds(self) -> int:
        return self.budget.max_rounds

    def left(self) -> float:
        return self.budget.left()

    def call_timeout(self) -> float:
        return self.budget.call_timeout()

    def build_left(self) -> float:
        return self.budget.build_left()

    def build_timeout(self) -> float:
        return self.budget.build_timeout()

    def note(self, text: str) -> None:
        """Say ``text`` as this stage's note."""
        self.said = dataclasses.replace(self.said, notes=(*self.said.notes, text))

    def failed(self, failure: CandidateFailure) -> None:
        """Say that a candidate (or a step of the stage) failed; the others go on."""
        self.said = dataclasses.replace(self.said, failures=(*self.said.failures, failure))

    def skip(self, what: str, need_s: float = 0.0) -> None:
        """Record something the budget left out (said once, with the others, in the last
        note), with the budget that would measure it where known."""
        self.said = self.said.then(Said(skipped=(what,), need_s=need_s))

    def guarded(self, what: str, stage: str, fn: Callable[[], T], code: str = "") -> T | None:
        """``fn()``, or None after recording its failure: one failing candidate never ends the
        doctor. A cancel from the user still does. A call the budget cut short is a note (raise
        ``budget_s``), not a failure of the tool or the model."""
        started = time.perf_counter()
        try:
            return fn()
        except WorkerCancelledError:
            raise
        except BudgetSpentError:
            self.skip(f"{what} (not started: the budget and its slack were spent)")
            return None
        except WorkerTimeoutError as err:
            if not self.budget.cut_short(err):
                self.failed(CandidateFailure(what, failure_text(err), stage, code))
            else:  # the doctor's own budget stopped it
                took = time.perf_counter() - started
                self.skip(
                    f"{what} (did not finish in the {took:.0f} s the budget left it"
                    + (f"; run it alone: {code})" if code else ")")
                )
            return None
        except Exception as err:  # noqa: BLE001 - ORT's tools raise anything (ValueError,
            # AssertionError with no message, IndexError…); each is a finding, not the end.
            self.failed(CandidateFailure(what, failure_text(err), stage, code))
            return None
