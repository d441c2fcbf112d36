"""The doctor's final stage: the screen's winners combined — the fastest promising setting
of each dimension together, with the best accurate model variant — and verified against the
baseline with the two best single changes, with more interleaved rounds for the candidates
whose interval is too wide to decide.

Only what is significantly faster in this stage can become the best
(:func:`~ortlab.diagnosis.best.best_of`); its rows are the facts' ``final`` rows.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from ortlab.analysis.quantization.metrics import lowest_cosine
from ortlab.core.config import LEVEL_ORDER, SessionConfig
from ortlab.core.run import Run
from ortlab.core.stats import MIN_ROUNDS, NOISE_BAND, paired_ratio
from ortlab.diagnosis import measure
from ortlab.diagnosis.budget import StageBudget
from ortlab.diagnosis.candidates import winning_settings
from ortlab.diagnosis.facts import (
    Candidate,
    CandidateKey,
    Facts,
    Kind,
    Outputs,
    candidate_key,
    measured_row,
    with_cosine,
)
from ortlab.diagnosis.outcome import Outcome, outcome

__all__ = ["combine", "settle"]

_MAX_EXTENSIONS = 3
"""Extensions of the combination stage for undecided candidates (each up to 24 rounds)."""


def combine(run: Run, budget: StageBudget, facts: Facts) -> Outcome:
    """Stage 3: the winners of each dimension together, re-measured with the best singles
    (the final stage's rows, with their outputs and latencies)."""
    meas, items, cfg = facts.measured, facts.items, run.config
    # Promising, not only significant: the screen's point estimate says faster. The final
    # stage re-measures every combination against the baseline, and only what is
    # significantly faster there can become the best.
    ok = {
        k: v
        for k, v in meas.items()
        if k != "baseline"
        and v.paired.ratio < 1 - NOISE_BAND
        and not v.paired.low >= 1  # NaN (too few rounds for an interval) stays promising
        and facts.accurate(v)
    }
    if not ok:
        budget.note("no candidate was faster than the baseline in the screen")
        return outcome(budget, facts)
    changes = winning_settings(ok, cfg)
    model_items = [(k, v) for k, v in ok.items() if CandidateKey.parse(k).is_variant]
    by_key = {key: (mm, steps) for key, mm, _, steps in items}
    combined_cfg = cfg.with_(**changes)
    finals: list[Candidate] = [Candidate(Kind.BASELINE.value, run.model, cfg, [])]
    if changes:
        finals.append(Candidate(Kind.SETTINGS.value, run.model, combined_cfg, []))
    if model_items:
        vkey, _ = min(model_items, key=lambda kv: kv[1].paired.ratio)
        mm, steps = by_key[vkey]
        level = max(combined_cfg.level, "extended", key=LEVEL_ORDER.index)
        finals.append(Candidate(Kind.COMBINED.value, mm, combined_cfg.with_(level=level), steps))
    for key, _ in sorted(ok.items(), key=lambda kv: kv[1].paired.ratio)[:2]:
        mm, steps = by_key[key]
        parsed = CandidateKey.parse(key)
        final = candidate_key(parsed.kind, parsed.arg, final=True)
        finals.append(Candidate(final, mm, next(it.config for it in items if it.key == key), steps))
    unique: dict[tuple[str, SessionConfig], Candidate] = {}
    for it in finals:
        unique.setdefault((str(it.model.path), it.config), it)
    finals = list(unique.values())
    if len(finals) < 2:
        return outcome(budget, facts)
    if budget.left() < 0:
        budget.skip(
            "the combination of the screen's winners, not verified (the time budget was "
            "used up): the screen's verdicts stand"
        )
        return outcome(budget, facts)
    return outcome(budget, _verify(run, budget, facts, finals))


def _verify(run: Run, budget: StageBudget, facts: Facts, finals: list[Candidate]) -> Facts:
    """Time the final candidates against the baseline (column 0): the facts with their rows,
    their output cosine, their outputs and latencies; one whose outputs cannot be computed is
    a failure."""
    runs, rounds = measure.plan(budget, facts, len(finals), 0.6, "the combination")
    timed = measure.time_items(
        run, budget, finals, rounds, runs, desc="doctor: verify the combination"
    )
    finals, med = timed.ran, timed.medians_ms
    # per candidate, its rounds and the baseline's rounds of the same calls (extensions
    # time the baseline with the undecided candidates only)
    cols = {it.key: (list(med[:, 0]), list(med[:, k])) for k, it in enumerate(finals)}
    extra = settle(run, budget, facts, finals, cols, runs=runs)
    latencies = measure.with_latencies(
        measure.with_latencies(facts.latencies, timed.latencies), extra
    )
    outputs: dict[str, Outputs] = dict(facts.outputs)
    rows = {}
    for key, mm, c, steps in finals[1:]:
        v = paired_ratio(*cols[key])
        p50 = float(np.median(cols[key][1]))
        got = outputs.get(key) or budget.guarded(
            f"candidate {key} ({measure.variant_name(run, mm)} · {c.label()})",
            "accuracy",
            functools.partial(measure.outputs_of, run, budget, mm, c, facts.eval_samples()),
        )
        if got is None:
            continue
        outputs[key] = got
        row = measured_row(
            key,
            mm,
            c,
            steps,
            v,
            p50=p50,
            stage="final",
            against="baseline",
            variant=measure.variant_name(run, mm),
        )
        rows[key] = with_cosine(row, lowest_cosine(outputs["baseline"], got))
    return replace(facts, measured={**facts.measured, **rows}, outputs=outputs, latencies=latencies)


def settle(
    run: Run,
    budget: StageBudget,
    facts: Facts,
    finals: list[Candidate],
    cols: dict[str, tuple[list[float], list[float]]],
    *,
    runs: int,
) -> dict[str, tuple[int, ...]]:
    """While the budget allows, more interleaved rounds for the candidates whose interval
    is too wide to decide: it still allows a gain beyond the noise band and does not show
    one (a 0.69x [0.35, 1.30] is not "no faster"). Rounds add up per candidate in ``cols``,
    paired with the baseline's rounds of the same calls; returns the extra runs' latencies."""
    added: dict[str, int] = {}  # said once, however many extensions it took
    latencies: dict[str, tuple[int, ...]] = {}
    try:
        for _ in range(_MAX_EXTENSIONS):
            open_ = [it for it in finals[1:] if paired_ratio(*cols[it.key]).undecided]
            if not open_:
                return latencies
            items = [finals[0], *open_]
            per_round = len(items) * runs * max(facts.baseline_ms, 0.01) / 1e3
            rounds = min(int(budget.left() * 0.9 / max(per_round, 1e-6)), 4 * MIN_ROUNDS)
            if rounds < 2:
                undecided = ", ".join(it.key for it in open_)
                budget.skip(f"more rounds for {undecided}, undecided after the combination")
                return latencies
            more = measure.time_items(
                run, budget, items, rounds, runs, desc="doctor: more rounds where undecided"
            )
            latencies = measure.with_latencies(latencies, more.latencies)
            if len(more.ran) != len(items):
                return latencies  # a candidate failed this time: what was measured stands
            for k, it in enumerate(more.ran[1:], start=1):
                cols[it.key][0].extend(more.medians_ms[:, 0])
                cols[it.key][1].extend(more.medians_ms[:, k])
                added[it.key] = added.get(it.key, 0) + rounds
    finally:
        if added:
            said = "; ".join(f"{n} more rounds for {k}" for k, n in added.items())
            budget.note(f"{said}: their intervals were too wide to decide")
    return latencies
