"""How the doctor measures a candidate, shared by its stages: a timing plan that fits the
budget (:func:`plan`), candidates timed interleaved with the baseline (:func:`time_items`, which
returns each one's latencies for the stage to add to its facts), and a candidate's outputs on
the evaluation samples (:func:`outputs_of`). Each reads what it is given: the doctor's
:class:`~ortlab.core.run.Run`, the stage's budget, the facts so far."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ortlab.analysis.quantization.quantize import Calibration
from ortlab.core.config import SessionConfig
from ortlab.core.errors import OrtlabError
from ortlab.core.model import Model
from ortlab.core.run import Run
from ortlab.core.stats import MIN_ROUNDS, plan_rounds
from ortlab.diagnosis.budget import StageBudget
from ortlab.diagnosis.facts import Candidate, CandidateFailure, Facts, Outputs
from ortlab.engine import tasks
from ortlab.engine.calls import Via, measure_interleaved
from ortlab.engine.calls import run as run_task
from ortlab.engine.tasks_timing import WARMUP_RUNS

__all__ = [
    "Timed",
    "outputs_of",
    "p50_ms",
    "plan",
    "time_items",
    "variant_name",
    "with_latencies",
]


def plan(
    budget: StageBudget, facts: Facts, n_items: int, share: float, what: str
) -> tuple[int, int]:
    """Runs per measurement and rounds (at most ``max_rounds``) that fit ``share`` of the
    remaining budget. Runs are cut before rounds, as a verdict needs MIN_ROUNDS rounds; when
    even the fewest runs leave fewer, ``what`` gets what fits (at least 2: one A B, one B A)
    and a note says its candidates get no verdict."""
    per_run = max(facts.baseline_ms, 0.01) / 1e3
    build = facts.seen.report.create_ms / 1e3 + WARMUP_RUNS * per_run  # each session warmed up
    available = max(budget.left() * share - n_items * build, 0.0)
    runs, rounds = plan_rounds(n_items, per_run, available, budget.max_rounds)
    if rounds < MIN_ROUNDS:
        spent = budget.budget_s - budget.left()
        needed = spent + n_items * (build + MIN_ROUNDS * runs * per_run) / share
        budget.skip(
            f"verdicts in {what}: {max(budget.left(), 0):.1f} s left had no room for "
            f"{MIN_ROUNDS} rounds, the fewest a 95 % verdict needs; it ran {rounds}, so its "
            "candidates get 'not enough rounds for a verdict'",
            needed,
        )
    return runs, rounds


@dataclass(frozen=True)
class Timed:
    """Candidates timed interleaved: the median ms per round (rows) and candidate (columns) of
    those that ran, those candidates, and every run's latency (ns) by key."""

    medians_ms: np.ndarray
    ran: list[Candidate]
    latencies: dict[str, tuple[int, ...]]


def time_items(
    run: Run, budget: StageBudget, items: list[Candidate], rounds: int, runs: int, *, desc: str
) -> Timed:
    """``items`` timed interleaved (the first is the reference) at ``run``'s inputs. The ones
    the worker could not build or run (its ``failed``) are said as failures and left out."""
    out = measure_interleaved(
        [(it.model, it.config) for it in items],
        run.with_(runs=runs, timeout=budget.call_timeout()),
        rounds=rounds,
        desc=desc,
        context=f"of {run.model.name!r} ({len(items)} candidates)",
    )
    failed = out.failed
    if 0 in failed:  # the worker raises for the reference itself; never compare without it
        raise OrtlabError(f"The reference {items[0].key!r} failed while timing: {failed[0]}")
    for k, msg in sorted(failed.items()):
        it = items[k]
        code = f"ortlab.benchmark(model, SessionConfig.from_json({it.config.to_json()!r}))"
        what = f"candidate {it.key} ({variant_name(run, it.model)} · {it.config.label()})"
        budget.failed(CandidateFailure(what, msg, "timing", code))
    ran = [k for k in range(len(items)) if k not in failed]
    return Timed(
        out.medians_ms[:, ran],
        [items[k] for k in ran],
        {items[k].key: tuple(out.latencies_ns[k]) for k in ran},
    )


def with_latencies(
    known: Mapping[str, tuple[int, ...]], more: Mapping[str, tuple[int, ...]]
) -> dict[str, tuple[int, ...]]:
    """Every run's latency by key: what the facts held, then ``more`` (a later stage's)."""
    out = dict(known)
    for key, times in more.items():
        out[key] = out.get(key, ()) + tuple(times)
    return out


def p50_ms(latencies: Sequence[int]) -> float:
    """The median of runs' latencies (ns), in ms."""
    return float(np.median(np.asarray(latencies) / 1e6))


def variant_name(run: Run, mm: Model) -> str:
    """How a failure or a row names a candidate's model ('original' for the doctor's)."""
    return "original" if mm is run.model else mm.name


def outputs_of(
    run: Run, budget: StageBudget, mm: Model, c: SessionConfig, samples: Calibration
) -> Outputs:
    """``mm``'s outputs under ``c`` on ``samples`` (the accuracy stage's)."""
    out: list[dict[str, np.ndarray]] = run_task(
        tasks.outputs_many,
        Via(
            desc="doctor: outputs",
            context=f"of {mm.name!r}",
            progress=False,
            timeout=budget.call_timeout(),
        ),
        model_path=str(mm.path),
        model_name=mm.name,
        config=c.with_(io_binding=False),
        samples=samples.samples,
        seeded=bool(run.model.random_ops),
    )
    return out
