"""The doctor's final stage: the screen's winners combined — the fastest promising setting
of each dimension together, with the best accurate model variant — and verified against the
baseline with the two best single changes, with more interleaved rounds for the candidates
whose interval is too wide to decide.

Only what is significantly faster in this stage can become the best
(:func:`~ortlab.diagnosis.best.best_of`); its rows are the ledger's ``final`` rows.
"""

from __future__ import annotations

import functools

import numpy as np

from ortlab.core.config import LEVEL_ORDER, SessionConfig
from ortlab.core.stats import MIN_ROUNDS, NOISE_BAND, paired_ratio
from ortlab.diagnosis import measure
from ortlab.diagnosis.candidates import winning_settings
from ortlab.diagnosis.facts import (
    Candidate,
    CandidateKey,
    Kind,
    Measured,
    Observed,
    baseline_ms,
    candidate_key,
    measured_row,
    with_cosine,
)
from ortlab.diagnosis.ledger import Item, Ledger
from ortlab.diagnosis.outcome import Got, Outcome

__all__ = ["combine", "settle"]

_MAX_EXTENSIONS = 3
"""Extensions of the combination stage for undecided candidates (each up to 24 rounds)."""


def combine(ledger: Ledger, got: Got, out: Outcome) -> Outcome:
    """Stage 3: the winners of each dimension together, re-measured with the best singles
    (``out.rows``: the final stage's rows)."""
    meas, items, seen = ledger.measured, got.items, got.seen
    # Promising, not only significant: the screen's point estimate says faster. The final
    # stage re-measures every combination against the baseline, and only what is
    # significantly faster there can become the best.
    ok = {
        k: v
        for k, v in meas.items()
        if k != "baseline"
        and v.paired.ratio < 1 - NOISE_BAND
        and not v.paired.low >= 1  # NaN (too few rounds for an interval) stays promising
        and ledger.accurate(v)
    }
    if not ok:
        out.said.notes.append("no candidate was faster than the baseline in the screen")
        return out
    changes = winning_settings(ok, ledger.cfg)
    model_items = [(k, v) for k, v in ok.items() if CandidateKey.parse(k).is_variant]
    by_key = {key: (mm, steps) for key, mm, _, steps in items}
    combined_cfg = ledger.cfg.with_(**changes)
    finals: list[Item] = [Candidate(Kind.BASELINE.value, ledger.m, ledger.cfg, [])]
    if changes:
        finals.append(Candidate(Kind.SETTINGS.value, ledger.m, combined_cfg, []))
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
    unique: dict[tuple[str, SessionConfig], Item] = {}
    for it in finals:
        unique.setdefault((str(it[1].path), it[2]), it)
    finals = list(unique.values())
    if len(finals) < 2:
        return out
    if ledger.left() < 0:
        ledger.skip(
            "the combination of the screen's winners, not verified (the time budget was "
            "used up): the screen's verdicts stand"
        )
        return out
    out.rows = _verify(ledger, finals, seen)
    return out


def _verify(ledger: Ledger, finals: list[Item], seen: Observed) -> dict[str, Measured]:
    """Time the final candidates against the baseline (column 0): their rows with their
    output cosine; one whose outputs cannot be computed is a failure."""
    runs, rounds = measure.plan(ledger, len(finals), seen, 0.6, "the combination")
    med, finals = measure.time_items(ledger, finals, rounds, runs, "doctor: verify the combination")
    # per candidate, its rounds and the baseline's rounds of the same calls (extensions
    # time the baseline with the undecided candidates only)
    cols = {it[0]: (list(med[:, 0]), list(med[:, k])) for k, it in enumerate(finals)}
    settle(ledger, finals, cols, runs, seen)
    rows = {}
    for key, mm, c, steps in finals[1:]:
        v = paired_ratio(*cols[key])
        p50 = float(np.median(cols[key][1]))
        outputs = ledger.outputs.get(key) or ledger.guarded(
            f"candidate {key} ({measure.variant_name(ledger, mm)} · {c.label()})",
            "accuracy",
            functools.partial(measure.outputs_of, ledger, mm, c),
        )
        if outputs is None:
            continue
        ledger.outputs[key] = outputs
        row = measured_row(
            key,
            mm,
            c,
            steps,
            v,
            p50=p50,
            stage="final",
            against="baseline",
            variant=measure.variant_name(ledger, mm),
        )
        rows[key] = with_cosine(row, measure.cosine_of(ledger, key))
    return rows


def settle(
    ledger: Ledger,
    finals: list[Item],
    cols: dict[str, tuple[list[float], list[float]]],
    runs: int,
    seen: Observed,
) -> None:
    """While the budget allows, more interleaved rounds for the candidates whose interval
    is too wide to decide: it still allows a gain beyond the noise band and does not show
    one (a 0.69x [0.35, 1.30] is not "no faster"). Rounds add up per candidate, paired
    with the baseline's rounds of the same calls."""
    added: dict[str, int] = {}  # said once, however many extensions it took
    try:
        for _ in range(_MAX_EXTENSIONS):
            open_ = [it for it in finals[1:] if paired_ratio(*cols[it[0]]).undecided]
            if not open_:
                return
            items = [finals[0], *open_]
            per_round = len(items) * runs * max(baseline_ms(seen, ledger.measured), 0.01) / 1e3
            rounds = min(int(ledger.left() * 0.9 / max(per_round, 1e-6)), 4 * MIN_ROUNDS)
            if rounds < 2:
                undecided = ", ".join(it[0] for it in open_)
                ledger.skip(f"more rounds for {undecided}, undecided after the combination")
                return
            more, ran = measure.time_items(
                ledger, items, rounds, runs, "doctor: more rounds where undecided"
            )
            if len(ran) != len(items):
                return  # a candidate failed this time: what was measured stands
            for k, it in enumerate(ran[1:], start=1):
                cols[it[0]][0].extend(more[:, 0])
                cols[it[0]][1].extend(more[:, k])
                added[it[0]] = added.get(it[0], 0) + rounds
    finally:
        if added:
            said = "; ".join(f"{n} more rounds for {k}" for k, n in added.items())
            ledger.said.notes.append(f"{said}: their intervals were too wide to decide")
