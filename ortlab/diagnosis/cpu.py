"""The doctor's CPU stage: what the baseline and each thread and spinning candidate cost in CPU
time per run (every thread of the process), and the cores each keeps busy once idle — the
cost latency hides. ORT's thread pool spins after a run waiting for the next (about 40 ms of a
core per spinning thread here); a service called a few times a second pays that spin on every
call, and a busy-waiting pool slows whatever else runs on the machine.

A stage as a function: :func:`cpu_stage` takes what it reads (the screened candidates, the
run they were timed at, the budget) and returns a :class:`CpuCosts`; :func:`best_for_cpu`
picks the candidate that saves the most CPU per run (``doctor(objective="cpu")``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ortlab.core.errors import OptionError
from ortlab.core.machine import IDLE_WINDOW_S
from ortlab.core.run import Run
from ortlab.core.stats import MIN_ROUNDS, NOISE_BAND, Paired, Verdict, paired_ratio
from ortlab.diagnosis.best import Best
from ortlab.diagnosis.budget import StageBudget
from ortlab.diagnosis.facts import (
    Candidate,
    CandidateFailure,
    CpuCost,
    CpuCosts,
    Facts,
    Kind,
    Measured,
)
from ortlab.diagnosis.outcome import Outcome, outcome
from ortlab.engine.calls import measure_cpu

__all__ = [
    "CPU_COLUMNS",
    "OBJECTIVES",
    "best_for_cpu",
    "cheapest",
    "check_objective",
    "cpu_stage",
    "cpu_verdict",
    "search_cpu",
]

OBJECTIVES = ("latency", "cpu")
"""What the doctor's best is chosen for: the shortest run, or the least CPU per run."""
CPU_SHARE = 0.25
"""The most of what is left of the budget the CPU stage may plan to take."""
BLOCK_S = 0.05
"""Each item's block of timed runs lasts about this long (at least 3 runs, at most MAX_RUNS)."""
MAX_RUNS = 5000
CPU_COLUMNS = (
    "key",
    "label",
    "cpu_ms_per_run",
    "wall_ms_per_run",
    "cores_per_run",
    "idle_cores",
    "cpu_ratio",
    "cpu_low",
    "cpu_high",
    "cpu_verdict",
)


def cpu_verdict(v: Verdict) -> str:
    """The sentence for a CPU-per-run ratio with its interval: less, more, or no measurable
    difference (the interval within the noise band), as a time verdict is said."""
    if math.isnan(v.low):
        return f"not enough rounds for a verdict on CPU ({v.rounds} rounds)"
    said = f"{v.ratio:.3f}x [{v.low:.3f}, {v.high:.3f}] ({v.confidence:.1%} CI, {v.rounds} rounds)"
    if v.high < 1 - NOISE_BAND:
        return f"{1 / v.ratio:.2f}x less CPU per run: CPU ratio {said}"
    if v.low > 1 + NOISE_BAND:
        return f"{v.ratio:.2f}x more CPU per run: CPU ratio {said}"
    if v.blind:
        return f"could not tell the CPU per run (it allows both no difference and 2x): {said}"
    return f"no measurable difference in CPU per run: CPU ratio {said}"


_ORDER = {Kind.BASELINE: 0, Kind.SPIN: 1, Kind.THREADS: 2}


def cpu_stage(
    items: Sequence[Candidate],
    measured: Mapping[str, Measured],
    *,
    timed_at: Callable[[int, float], Run],
    budget: StageBudget,
    per_run_ms: float,
    objective: str,
) -> CpuCosts:
    """Measure the CPU cost of the baseline and each thread and spinning candidate (every
    screened candidate too with ``objective="cpu"``), MIN_ROUNDS rounds, within CPU_SHARE of
    the budget left (the thread and spinning candidates first; what does not fit is said).
    ``timed_at(runs, timeout)`` gives the Run to measure at (the search's inputs)."""
    wanted = [
        c
        for c in items
        if c.key in measured
        and measured[c.key].stage == "screen"
        and (objective == "cpu" or c.parsed.kind in _ORDER)
    ]
    wanted.sort(key=lambda c: _ORDER.get(c.parsed.kind, 3))
    if not wanted or wanted[0].key != "baseline":
        return CpuCosts(skipped=["the CPU cost (the baseline was not timed)"])
    runs = int(min(max(math.ceil(BLOCK_S * 1e3 / max(per_run_ms, 1e-3)), 3), MAX_RUNS))
    each_s = MIN_ROUNDS * (IDLE_WINDOW_S + runs * per_run_ms / 1e3)
    fits = int(budget.left() * CPU_SHARE / each_s)
    skipped = []
    if fits < 2:
        return CpuCosts(
            skipped=[f"the CPU cost ({len(wanted)} settings need ~{len(wanted) * each_s:.0f} s)"]
        )
    if fits < len(wanted):
        skipped.append("the CPU cost of " + ", ".join(c.key for c in wanted[fits:]))
        wanted = wanted[:fits]
    out = measure_cpu(
        [(c.model, c.config) for c in wanted],
        timed_at(runs, budget.call_timeout()),
        rounds=MIN_ROUNDS,
        runs=runs,
        desc=f"doctor: CPU cost of {len(wanted)} settings",
        context=f"({len(wanted)} settings)",
    )
    rows: dict[str, CpuCost] = {}
    base = out.cpu_ms[:, 0]
    for k, c in enumerate(wanted):
        if k in out.failed:
            continue
        v = paired_ratio(base, out.cpu_ms[:, k])
        text = "baseline" if k == 0 else cpu_verdict(v)
        rows[c.key] = CpuCost(
            key=c.key,
            label=measured[c.key].label,
            config=c.config,
            cpu_ms=float(np.median(out.cpu_ms[:, k])),
            wall_ms=float(np.median(out.wall_ms[:, k])),
            idle_cores=float(np.median(out.idle_cores[:, k])),
            paired=Paired.of(v, text),
        )
    notes = (
        []
        if out.interleaved
        else [
            "the CPU cost was measured one setting after another (their sessions did not fit in "
            "memory together), not interleaved"
        ]
    )
    return CpuCosts(
        rows=rows,
        rounds=MIN_ROUNDS,
        runs=runs,
        notes=notes,
        skipped=skipped,
        failed={wanted[k].key: msg for k, msg in out.failed.items()},
    )


def best_for_cpu(
    costs: CpuCosts, measured: Mapping[str, Measured], accurate: Callable[[Measured], bool]
) -> CpuCost | None:
    """The accurate candidate whose CPU per run is lowest among those that save CPU beyond
    noise (None when none does)."""
    pool = [
        r for k, r in costs.rows.items() if k != "baseline" and r.saves and accurate(measured[k])
    ]
    return min(pool, key=lambda r: r.paired.ratio) if pool else None


def check_objective(objective: str) -> None:
    """Refuse an objective the doctor does not know, before it measures anything."""
    if objective not in OBJECTIVES:
        raise OptionError(
            f"objective={objective!r} is not one the doctor knows: choose one of "
            f"{', '.join(map(repr, OBJECTIVES))} (the shortest run, or the least CPU per run)."
        )


def search_cpu(run: Run, budget: StageBudget, facts: Facts, *, objective: str) -> Outcome:
    """The CPU stage (:func:`~ortlab.diagnosis.cpu.cpu_stage`) at the doctor's inputs
    (``cpu``), what it left out and what failed said as the stage's own."""
    cpu = cpu_stage(
        facts.items,
        facts.measured,
        timed_at=lambda runs, limit: run.with_(runs=runs, timeout=limit),
        budget=budget,
        per_run_ms=facts.baseline_ms,
        objective=objective,
    )
    for note in cpu.notes:
        budget.note(note)
    for what in cpu.skipped:
        budget.skip(what)
    for key, why in cpu.failed.items():
        budget.failed(CandidateFailure(f"the CPU cost of {key}", why, "cpu"))
    return outcome(budget, dataclasses.replace(facts, cpu=cpu))


def cheapest(run: Run, facts: Facts) -> Best:
    """``doctor(objective="cpu")``'s best: the accurate candidate that saves the most CPU per
    run beyond noise, its CPU verdict first and its latency verdict beside it; without one,
    the baseline, with why."""
    cpu = facts.cpu or CpuCosts()
    won = best_for_cpu(cpu, facts.measured, facts.accurate)
    nan = float("nan")
    if won is None:
        why = (
            "no candidate used measurably less CPU per run than the baseline"
            if cpu.rows
            else "the CPU cost was not measured (see the notes)"
        )
        return Best(
            run.config,
            "original",
            str(run.model.path),
            [],
            Paired(1.0, nan, nan, why),
            1.0,
            objective="cpu",
        )
    row = facts.measured[won.key]
    return Best(
        row.config,
        row.variant,
        row.model_path,
        row.steps,
        won.paired,
        row.cosine,
        won.key,
        objective="cpu",
        latency=row.paired,
    )
