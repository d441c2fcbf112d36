"""Verdict intervals: their coverage is what they claim, checked by simulation and against an
independent count of sign patterns; too few rounds give no verdict at all."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from ortlab.core.config import SessionConfig
from ortlab.core.stats import MIN_ROUNDS, NOISE_BAND, min_rounds, paired_ratio

# Every round count ortlab's verbs use by default or can reach: the doctor's screen (6), its
# survivors and combination (up to its default rounds=8 and the CLI's --rounds 8), compare and
# optimization_diff (8), benchmark comparisons (10), and larger ones users ask for.
ROUND_COUNTS = (6, 7, 8, 9, 10, 12, 16, 20, 30)


def _sign_pattern_coverage(n: int, low_rank: int) -> float:
    """P(x_(k) <= median <= x_(n-k+1)) counted over all 2**n equally likely patterns of which
    rounds fall below the true median (an independent route to the binomial coverage)."""
    hits = 0
    for pattern in itertools.product((0, 1), repeat=n):
        below = sum(pattern)
        hits += low_rank <= below <= n - low_rank
    return hits / 2**n


def test_minimum_rounds_for_95_percent_is_6() -> None:
    assert MIN_ROUNDS == min_rounds(0.95) == 6
    assert min_rounds(0.90) == 5 and min_rounds(0.99) == 8


@pytest.mark.parametrize("n", [3, 4, 5])
def test_too_few_rounds_give_no_verdict(n: int) -> None:
    a = np.ones(n)
    v = paired_ratio(a, a * 0.5)  # twice as fast every round, yet too few rounds to say so
    assert not v.significant
    assert math.isnan(v.low) and math.isnan(v.high) and math.isnan(v.confidence)
    assert v.ratio == pytest.approx(0.5)
    text = v.text("A", "B")
    assert "not enough rounds for a verdict (need ≥ 6" in text and "faster" not in text
    assert f"{n} rounds" in text


@pytest.mark.parametrize("n", [6, 7, 8, 10, 13, 16])
def test_stated_confidence_is_the_binomial_coverage(n: int) -> None:
    v = paired_ratio(np.ones(n), np.arange(1.0, n + 1))  # per-round ratios 1 … n, sorted
    k = int(v.low)  # the ratios are their own ranks: the bounds name the order statistics
    assert v.high == n - k + 1
    assert v.confidence == pytest.approx(_sign_pattern_coverage(n, k), abs=1e-12)
    assert v.confidence >= 0.95
    # the narrowest such pair: one rank further in falls below 95 %
    assert k + 1 > (n + 1) / 2 or _sign_pattern_coverage(n, k + 1) < 0.95
    assert f"{v.confidence:.1%} CI, {n} rounds" in v.text()


def test_six_rounds_state_their_true_coverage() -> None:
    v = paired_ratio(np.ones(6), np.full(6, 0.8))
    assert v.confidence == pytest.approx(1 - 2 / 2**6)  # 0.969: [min, max] of 6 rounds
    assert v.significant and "96.9% CI, 6 rounds" in v.text()


def test_simulated_coverage_is_at_least_93_percent() -> None:
    """Per-round ratios from a skewed distribution (lognormal, true median 0.9), many trials per
    round count: the interval must contain the true median at least 93 % of the time."""
    rng = np.random.default_rng(13)
    true_median, trials = 0.9, 2000
    for n in ROUND_COUNTS:
        ratios = true_median * np.exp(rng.normal(0.0, 0.3, size=(trials, n)))
        ones = np.ones(n)
        covered = 0
        for row in ratios:
            v = paired_ratio(ones, row)
            covered += v.low <= true_median <= v.high
        coverage = covered / trials
        assert coverage >= 0.93, f"{n} rounds: interval covered the median {coverage:.1%}"


def test_noise_band_keeps_small_changes_out_of_verdicts() -> None:
    n = 10
    within = paired_ratio(np.ones(n), np.full(n, 1 - NOISE_BAND / 2))
    assert not within.significant and "perhaps by no more than" in within.text()
    assert "no measurable" not in within.text(), "its interval excludes 1"
    rng = np.random.default_rng(3)
    noisy = paired_ratio(np.ones(40), 1 + rng.normal(0, 0.005, 40))
    assert noisy.holds_one and "no measurable difference" in noisy.text()
    beyond = paired_ratio(np.ones(n), np.full(n, 1 + 2 * NOISE_BAND))
    assert beyond.significant and "slower" in beyond.text()


@pytest.mark.parametrize("n", [6, 40, 200, 201, 5000, 60_000])
def test_the_median_interval_is_the_narrowest_with_its_coverage_at_any_size(n: int) -> None:
    """Long benchmarks (60,000 runs of a tiny model) get the same exact-coverage interval as
    short ones, checked against scipy's binomial (the float path above 200 values)."""
    from scipy.stats import binom

    from ortlab.core.stats import median_interval

    found = median_interval(n)
    assert found is not None
    k, coverage = found
    assert coverage == pytest.approx(1 - 2 * binom.cdf(k - 1, n, 0.5), abs=1e-9)
    assert coverage >= 0.95 > 1 - 2 * binom.cdf(k, n, 0.5)


def test_an_interval_with_too_few_rounds_never_reads_nan() -> None:
    from ortlab.core.stats import interval_text

    assert interval_text(1.2345, 1.1, 1.4) == "1.234 [1.100, 1.400]"
    assert interval_text(-3.0, -4.0, 1.0, 1, "+") == "-3.0 [-4.0, +1.0]"
    nan = float("nan")
    assert interval_text(0.636, nan, nan) == "0.636 (no interval: too few rounds)"


def test_a_slower_verdict_is_beyond_the_noise_band() -> None:
    """Pruned after the screen only when all of the interval is beyond the band above 1."""
    from ortlab.core.stats import Verdict

    assert Verdict(1.30, 1.20, 1.40, 0.97, 6, NOISE_BAND).slower
    assert not Verdict(1.02, 1.01, 1.03, 0.97, 6, NOISE_BAND).slower  # 1.01: in the band
    assert not Verdict(0.69, 0.35, 1.30, 0.97, 6, NOISE_BAND).slower
    assert not Verdict(2.0, math.nan, math.nan, math.nan, 3, NOISE_BAND).slower  # no interval


def test_plan_rounds_fits_the_budget_and_cuts_runs_before_rounds() -> None:
    from ortlab.core.stats import MIN_ROUNDS, plan_rounds

    runs, rounds = plan_rounds(4, 0.001, 10.0, max_rounds=12)  # 1 ms runs, 10 s
    assert runs == 30 and rounds == 12  # about 30 ms of runs per measurement, rounds capped
    assert 4 * runs * rounds * 0.001 <= 10.0
    runs, rounds = plan_rounds(4, 0.001, 0.5, max_rounds=12)  # tight: runs cut first
    assert rounds >= MIN_ROUNDS and runs < 30 and 4 * runs * rounds * 0.001 <= 0.5
    assert plan_rounds(4, 0.5, 0.1, max_rounds=12) == (2, 2)  # nothing fits: the floor


def test_a_paired_row_keeps_its_table_columns_and_round_trips() -> None:
    """The rows that compare against a reference hold one Paired; their tables spread it back
    into the columns they always had (ratio, low, high, verdict, in place) and their JSON
    round-trips, NaN bounds of an untimed row included."""
    from ortlab.analysis.optimizers.ablation import AblationResult, AblationRow
    from ortlab.analysis.optimizers.levels import LatencyRow, OptimizationResult
    from ortlab.core.stats import Paired

    v = paired_ratio([10.0] * 6, [8.0, 8.1, 7.9, 8.0, 8.2, 7.8])
    rows = [
        AblationRow("", 3, 10, 0, 5.0, math.nan, 10.0, Paired.of(v, "baseline"), 0.0, 1.0),
        AblationRow("Fuse", 3, 13, 3, 4.0, 1.0, 8.0, Paired.untimed("failed: x"), 0.1, 0.9),
    ]
    a = AblationResult(model="m", config=SessionConfig(), level="all", rows=rows, rounds=6)
    paired = ["ratio", "ratio_low", "ratio_high", "confidence", "verdict"]  # a Paired, spread back
    assert a.to_pandas().columns.tolist() == [
        "off",
        "fired",
        "nodes",
        "node_change",
        "create_ms",
        "own_ms",
        "p50_ms",
        *paired,
        "max_abs",
        "cosine",
    ]
    assert a.to_pandas().loc[0, "ratio"] == v.ratio and rows[0].paired.rounds == 6
    again = AblationResult.from_json(a.to_json())
    assert again.rows[0].paired == rows[0].paired and math.isnan(again.rows[1].paired.low)
    assert again.rows[1].paired.verdict == "failed: x"
    lat = [LatencyRow("disabled", 10.0, Paired.of(v, "baseline"))]
    o = OptimizationResult(
        model="m",
        config=SessionConfig(),
        original_nodes=1,
        original_op_types={},
        original_ops={},
        levels=[],
        latency_rows=lat,
        rounds_ms=[],
    )
    assert o.to_pandas().columns.tolist() == ["level", "p50_ms", *paired]
    assert o.to_pandas().loc[0, "confidence"] == v.confidence  # the interval's own coverage
    assert OptimizationResult.from_json(o.to_json()).latency_rows == lat


def test_an_interval_that_cannot_tell_2x_says_so() -> None:
    """The doctor's busy-machine case (a decode 3.5-4x slower read as "no difference"): 8
    rounds whose ratios scatter from 0.15x to 11x hold 1 and reach past 2x, so the verdict is
    "could not tell", with the load where it was measured; a narrow interval around 1 stays
    "no measurable difference"."""
    wild = paired_ratio([1.0] * 8, [0.153, 0.4, 0.9, 3.2, 3.5, 3.7, 6.0, 11.141], confidence=0.95)
    assert wild.holds_one and wild.high >= 2 and wild.blind
    assert "could not tell" in wild.text() and "no measurable difference" not in wild.text()
    busy = dataclasses.replace(wild, busy=1.4)
    assert "could not tell (the machine was busy: 1.4 other cores)" in busy.text()
    calm = paired_ratio([1.0] * 8, [0.99, 1.0, 1.01, 1.0, 0.98, 1.02, 1.0, 1.01])
    assert not calm.blind and "no measurable difference" in calm.text()
