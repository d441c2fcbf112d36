"""How the doctor measures a candidate, shared by its stages: a timing plan that fits the
budget (:func:`plan`), candidates timed interleaved with the baseline (:func:`time_items`,
each row's latencies kept in the ledger), a candidate's outputs on the evaluation samples
(:func:`outputs_of`) and their lowest cosine with the baseline's (:func:`cosine_of`). Each
reads the doctor run's :class:`~ortlab.diagnosis.ledger.Ledger`."""

from __future__ import annotations

import numpy as np

from ortlab.analysis.quantization.metrics import lowest_cosine
from ortlab.analysis.quantization.quantize import Calibration
from ortlab.core.config import SessionConfig
from ortlab.core.errors import OrtlabError
from ortlab.core.model import Model
from ortlab.core.stats import MIN_ROUNDS, plan_rounds
from ortlab.diagnosis.facts import CandidateFailure, Observed, baseline_ms
from ortlab.diagnosis.ledger import Item, Ledger
from ortlab.engine import tasks
from ortlab.engine.calls import Via, measure_interleaved
from ortlab.engine.calls import run as run_task
from ortlab.engine.tasks_timing import WARMUP_RUNS

__all__ = ["cosine_of", "outputs_of", "plan", "time_items", "variant_name"]


def plan(ledger: Ledger, n_items: int, seen: Observed, share: float, what: str) -> tuple[int, int]:
    """Runs per measurement and rounds (at most ``max_rounds``) that fit ``share`` of the
    remaining budget. Runs are cut before rounds, as a verdict needs MIN_ROUNDS rounds; when
    even the fewest runs leave fewer, ``what`` gets what fits (at least 2: one A B, one B A)
    and a note says its candidates get no verdict."""
    per_run = max(baseline_ms(seen, ledger.measured), 0.01) / 1e3
    build = seen.report.create_ms / 1e3 + WARMUP_RUNS * per_run  # each session warmed up
    available = max(ledger.left() * share - n_items * build, 0.0)
    runs, rounds = plan_rounds(n_items, per_run, available, ledger.max_rounds)
    if rounds < MIN_ROUNDS:
        spent = ledger.budget_s - ledger.left()
        needed = spent + n_items * (build + MIN_ROUNDS * runs * per_run) / share
        ledger.skip(
            f"verdicts in {what}: {max(ledger.left(), 0):.1f} s left had no room for "
            f"{MIN_ROUNDS} rounds, the fewest a 95 % verdict needs; it ran {rounds}, so its "
            "candidates get 'not enough rounds for a verdict'",
            needed,
        )
    return runs, rounds


def time_items(
    ledger: Ledger, items: list[Item], rounds: int, runs: int, desc: str
) -> tuple[np.ndarray, list[Item]]:
    """Median ms per round (rows) and candidate (columns) of the candidates that ran, and
    those candidates. The ones the worker could not build or run (its ``failed``) are
    recorded as failures and left out."""
    out = measure_interleaved(
        [(mm, c) for _, mm, c, _ in items],
        ledger.run.with_(runs=runs, timeout=ledger.call_timeout()),
        rounds=rounds,
        desc=desc,
        context=f"of {ledger.m.name!r} ({len(items)} candidates)",
    )
    failed = out.failed
    if 0 in failed:  # the worker raises for the reference itself; never compare without it
        raise OrtlabError(f"The reference {items[0][0]!r} failed while timing: {failed[0]}")
    for k, msg in sorted(failed.items()):
        key, mm, c, _ = items[k]
        code = f"ortlab.benchmark(model, SessionConfig.from_json({c.to_json()!r}))"
        what = f"candidate {key} ({variant_name(ledger, mm)} · {c.label()})"
        ledger.said.failures.append(CandidateFailure(what, msg, "timing", code))
    ran = [k for k in range(len(items)) if k not in failed]
    med = out.medians_ms[:, ran]  # one column per item, NaN where one failed
    lat = [out.latencies_ns[k] for k in ran]
    kept = [items[k] for k in ran]
    for (key, *_), times in zip(kept, lat, strict=True):
        ledger.latencies.setdefault(key, []).extend(times)
    return med, kept


def variant_name(ledger: Ledger, mm: Model) -> str:
    """How a failure or a row names a candidate's model ('original' for the doctor's)."""
    return "original" if mm is ledger.m else mm.name


def outputs_of(
    ledger: Ledger, mm: Model, c: SessionConfig, samples: Calibration | None = None
) -> list[dict[str, np.ndarray]]:
    """``mm``'s outputs under ``c`` on ``samples`` (default: the accuracy stage's)."""
    out: list[dict[str, np.ndarray]] = run_task(
        tasks.outputs_many,
        Via(
            desc="doctor: outputs",
            context=f"of {mm.name!r}",
            progress=False,
            timeout=ledger.call_timeout(),
        ),
        model_path=str(mm.path),
        model_name=mm.name,
        config=c.with_(io_binding=False),
        samples=(samples or ledger.eval_samples()).samples,
        seeded=bool(ledger.m.random_ops),
    )
    return out


def cosine_of(ledger: Ledger, key: str) -> float:
    """The lowest output cosine of ``key`` against the baseline's outputs."""
    return lowest_cosine(ledger.outputs["baseline"], ledger.outputs[key])
