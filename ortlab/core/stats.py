"""Latency statistics and honest comparisons.

Every "A is faster than B" ortlab prints comes from :func:`paired_ratio`: runs of A and B
interleaved (A B B A …) so machine drift hits both, the ratio B/A taken per round, and a
distribution-free confidence interval for the median ratio: a pair of order statistics of the
per-round ratios whose coverage follows from the binomial distribution alone (the sign-test
interval), so the confidence printed is the coverage the interval really has. When the interval
reaches into the noise band around 1 the verdict is "no measurable difference"; with fewer rounds
than such an interval needs (6 for 95 %) there is no verdict at all.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "MIN_ROUNDS",
    "NOISE_BAND",
    "PAIRED_COLUMNS",
    "LatencyStats",
    "Paired",
    "Verdict",
    "interval_columns",
    "interval_text",
    "latency_stats",
    "median_interval",
    "min_rounds",
    "paired_columns",
    "paired_ratio",
    "plan_rounds",
    "shift_interval",
    "spread",
    "theil_sen",
]

NOISE_BAND = 0.02
"""Time ratios within 1 ± NOISE_BAND are "no measurable difference", whatever the interval."""
BLIND = 0.5
"""An interval holding 1 that reaches this ratio or its inverse says "could not tell"."""


@dataclass(frozen=True)
class LatencyStats:
    """Latency summary in milliseconds."""

    count: int
    mean_ms: float
    std_ms: float
    min_ms: float
    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    runs_per_s: float = float("nan")
    """Runs per second one after another (1000 / mean ms): not a throughput, which
    ``ortlab.throughput`` measures as requests completed per window under concurrency."""


def latency_stats(latencies_ns: Sequence[int] | np.ndarray) -> LatencyStats:
    ms = np.asarray(latencies_ns, dtype=np.float64) / 1e6
    if ms.size == 0:
        nan = float("nan")
        return LatencyStats(0, nan, nan, nan, nan, nan, nan, nan, nan, nan)
    p50, p90, p95, p99 = np.percentile(ms, [50, 90, 95, 99])
    mean = float(ms.mean())
    return LatencyStats(
        count=int(ms.size),
        mean_ms=mean,
        std_ms=float(ms.std(ddof=1)) if ms.size > 1 else 0.0,
        min_ms=float(ms.min()),
        p50_ms=float(p50),
        p90_ms=float(p90),
        p95_ms=float(p95),
        p99_ms=float(p99),
        max_ms=float(ms.max()),
        runs_per_s=1e3 / mean if mean > 0 else float("nan"),
    )


def interval_text(value: float, low: float, high: float, digits: int = 3, sign: str = "") -> str:
    """``1.234 [1.100, 1.400]``; with no interval (too few rounds: NaN bounds) ``1.234 (no
    interval: too few rounds)`` — never ``[nan, nan]``. ``sign="+"`` shows the sign (shifts)."""
    f = f"{{:{sign}.{digits}f}}"
    if math.isnan(low) or math.isnan(high):
        return f"{f.format(value)} (no interval: too few rounds)"
    return f"{f.format(value)} [{f.format(low)}, {f.format(high)}]"


# ---------------------------------------------------------------------- the median's interval


def _p_half(n: int, i: int) -> float:
    """P(Binom(n, ½) = i): from exact integers up to 1,000 values, log-space above (a benchmark
    of 100,000 runs; the error stays far below 1e-9)."""
    if n <= 1000:
        return math.comb(n, i) / (1 << n)
    return math.exp(
        math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2.0)
    )


def median_interval(n: int, confidence: float = 0.95) -> tuple[int, float] | None:
    """The narrowest symmetric pair of order statistics [x_(k), x_(n-k+1)] (ranks from 1) whose
    coverage of the median is at least ``confidence``: ``(k, coverage)``, or None when even
    [min, max] covers less (too few values). Coverage is 1 - 2·P(Binom(n, ½) ≤ k-1), the
    binomial tail summed once, term by term."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), not {confidence!r}")
    if n < 1:
        return None
    tail, k = _p_half(n, 0), 1  # tail = P(X ≤ k-1)
    if 1 - 2 * tail < confidence:
        return None
    while 2 * (k + 1) <= n + 1:
        wider = tail + _p_half(n, k)
        if 1 - 2 * wider < confidence:
            break
        tail, k = wider, k + 1
    return k, 1 - 2 * tail


def median_with_interval(
    values: Sequence[float] | np.ndarray, confidence: float = 0.95
) -> tuple[float, float, float, float]:
    """``(median, low, high, coverage)`` of ``values``: the interval is the pair of order
    statistics :func:`median_interval` picks (NaN bounds and coverage when too few values)."""
    xs = np.sort(np.asarray(values, dtype=np.float64))
    mid = float(np.median(xs)) if xs.size else math.nan
    found = median_interval(int(xs.size), confidence)
    if found is None:
        return mid, math.nan, math.nan, math.nan
    k, coverage = found
    return mid, float(xs[k - 1]), float(xs[xs.size - k]), coverage


def min_rounds(confidence: float = 0.95) -> int:
    """Fewest rounds for which an order-statistic interval of the median reaches
    ``confidence`` (its [min, max] covers 1 - 2·½ⁿ)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), not {confidence!r}")
    n = 1
    while 1 - 2 * _p_half(n, 0) < confidence:
        n += 1
    return n


MIN_ROUNDS = min_rounds(0.95)
"""Rounds a 95 % verdict needs (6: [min, max] of 6 ratios covers the median 96.9 % of the time)."""


# ---------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Verdict:
    """Median of per-round ratios B/A with an order-statistic confidence interval."""

    ratio: float
    """Median of per-round (B / A); < 1 means B is faster."""
    low: float
    """Lower bound of the interval; NaN when the rounds are too few for one."""
    high: float
    confidence: float
    """The interval's actual coverage (≥ ``requested``; e.g. 0.969 for 6 rounds); NaN when
    there is no interval."""
    rounds: int
    noise: float
    requested: float = 0.95
    """The confidence asked for."""
    busy: float | None = None
    """Other processes' cores while the rounds ran, where the caller measured it."""

    @property
    def enough(self) -> bool:
        """The rounds were enough for an interval at the requested confidence."""
        return not (math.isnan(self.low) or math.isnan(self.high))

    @property
    def significant(self) -> bool:
        """There is an interval, and all of it is beyond the noise band on one side of 1."""
        return self.enough and (self.high < 1 - self.noise or self.low > 1 + self.noise)

    @property
    def holds_one(self) -> bool:
        """The interval contains 1 (no difference is what it allows): the only case a verdict
        may call "no measurable difference"."""
        return self.enough and self.low <= 1 <= self.high

    @property
    def undecided(self) -> bool:
        """An interval that allows a gain beyond the noise band without showing one (a
        0.69x [0.35, 1.30] is not "no faster": more rounds can decide it)."""
        return self.enough and not self.significant and self.low < 1 - self.noise and self.ratio < 1

    @property
    def blind(self) -> bool:
        """An interval that holds 1 and reaches a 2x change either way (its low at most
        :data:`BLIND` or its high at least 1 / BLIND): it cannot tell no difference from a 2x
        one, so it is never read as "no measurable difference"."""
        return self.holds_one and (self.low <= BLIND or self.high >= 1 / BLIND)

    @property
    def slower(self) -> bool:
        """B is significantly slower than A."""
        return self.significant and self.ratio > 1

    def speedup(self) -> float:
        return 1.0 / self.ratio if self.ratio > 0 else float("nan")

    def text(self, a: str = "A", b: str = "B") -> str:
        if not self.enough:
            return (
                f"{b} vs {a}: not enough rounds for a verdict (need ≥ "
                f"{min_rounds(self.requested)} for a {self.requested:.0%} interval, have "
                f"{self.rounds} rounds); median time ratio {self.ratio:.3f}x"
            )
        ci = (
            f"{self.ratio:.3f}x [{self.low:.3f}, {self.high:.3f}] "
            f"({self.confidence:.1%} CI, {self.rounds} rounds)"
        )
        if self.blind:
            busy = (
                f" (the machine was busy: {self.busy:.1f} other cores)"
                if self.busy is not None and self.busy >= 0.5
                else ""
            )
            return (
                f"{b} vs {a}: could not tell{busy}: the interval allows both no difference and "
                f"a 2x one, {ci}; measure again with more rounds or on a quieter machine"
            )
        if not self.significant and self.holds_one:
            return f"{b} vs {a}: no measurable difference, {ci}"
        if not self.significant:  # excludes 1, but reaches into the noise band
            side = "faster" if self.ratio < 1 else "slower"
            return (
                f"{b} is {side} than {a}, perhaps by no more than the ±{self.noise:.0%} noise: "
                f"time ratio {ci}"
            )
        if self.ratio < 1:
            return f"{b} is {self.speedup():.2f}x faster than {a}: time ratio {ci}"
        return f"{b} is {self.ratio:.2f}x slower than {a}: time ratio {ci}"

    def __str__(self) -> str:
        return self.text()


@dataclass(frozen=True)
class Paired:
    """One paired comparison as a result's row keeps it: the time ratio to the reference with
    its interval, the verdict sentence ortlab prints, and the rounds it came from. Every row
    that compares against a reference (compare_configs, the optimization levels, the ablation,
    the variants, the doctor's candidates and its best) holds one instead of its own copy of
    these fields; every table spreads it by :func:`spread` into ``ratio``, ``ratio_low``,
    ``ratio_high``, ``confidence``, ``verdict`` (every interval column is named by
    :func:`interval_columns`: the quantity, then ``_low`` and ``_high``)."""

    ratio: float
    """Median of the per-round ratios (row / reference); < 1 is faster. NaN when not timed."""
    low: float
    """Lower bound of the interval; NaN when the rounds were too few or nothing was timed."""
    high: float
    verdict: str
    """The sentence ('baseline' for the reference itself, 'failed: …' when it did not run)."""
    rounds: int = 0
    """The interleaved rounds the ratio is the median of (0 when not timed)."""
    confidence: float = float("nan")
    """The interval's actual coverage (e.g. 0.969 for 6 rounds); NaN without an interval."""

    @classmethod
    def of(cls, verdict: Verdict, text: str) -> Paired:
        return cls(
            verdict.ratio, verdict.low, verdict.high, text, verdict.rounds, verdict.confidence
        )

    def as_verdict(self) -> Verdict:
        """The :class:`Verdict` it keeps (at the one noise band): what its interval says."""
        return Verdict(self.ratio, self.low, self.high, self.confidence, self.rounds, NOISE_BAND)

    @property
    def significant(self) -> bool:
        """Its interval lies beyond the noise band on one side of 1 (``Verdict.significant``)."""
        return self.as_verdict().significant

    @classmethod
    def untimed(cls, text: str) -> Paired:
        """A row with no time: NaN ratio and bounds, the reason as its verdict."""
        nan = float("nan")
        return cls(nan, nan, nan, text)


def interval_columns(name: str) -> tuple[str, str]:
    """THE names of an interval's columns in every table: ``name`` then ``_low`` and
    ``_high`` (``ratio_low``, ``peak_high``, ``requests_per_s_low``)."""
    return f"{name}_low", f"{name}_high"


PAIRED_COLUMNS = ("ratio", *interval_columns("ratio"), "confidence", "verdict")
"""The columns a :class:`Paired` spreads into, in every table."""


def spread(p: Paired, prefix: str = "") -> dict[str, float | str]:
    """THE spread of a :class:`Paired` into table columns (``PAIRED_COLUMNS``; ``prefix``
    names them where a row holds two: ``decode_ratio``, ``decode_ratio_low``, …)."""
    values: tuple[float | str, ...] = (p.ratio, p.low, p.high, p.confidence, p.verdict)
    return {prefix + k: v for k, v in zip(PAIRED_COLUMNS, values, strict=True)}


def paired_columns(row: DataclassInstance) -> dict[str, object]:
    """A dataclass row as a table row: its fields in order, a :class:`Paired` spread in place
    (:func:`spread`)."""
    out: dict[str, object] = {}
    for f in fields(row):
        value = getattr(row, f.name)
        if isinstance(value, Paired):
            out.update(spread(value))
        else:
            out[f.name] = value
    return out


def paired_ratio(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    noise: float = NOISE_BAND,
    seed: int = 0,
) -> Verdict:
    """Verdict on per-round times ``a[i]``, ``b[i]`` measured interleaved in round ``i``.

    The interval is the sign-test interval of the median per-round ratio (see
    :func:`median_interval`); its bounds are NaN when there are fewer rounds than
    ``confidence`` needs. ``resamples`` and ``seed`` are accepted for compatibility and ignored
    (the interval used to be a bootstrap; it is exact now and needs no random numbers)."""
    del resamples, seed
    av = np.asarray(a, dtype=np.float64)
    bv = np.asarray(b, dtype=np.float64)
    if av.shape != bv.shape or av.ndim != 1:
        raise ValueError(
            f"paired_ratio needs two 1-D sequences of the same length (one value per round); "
            f"got shapes {av.shape} and {bv.shape}"
        )
    ratios = np.sort(bv / av)
    n = int(ratios.size)
    point = float(np.median(ratios)) if n else float("nan")
    chosen = median_interval(n, confidence)
    if chosen is None:
        nan = float("nan")
        return Verdict(point, nan, nan, nan, n, noise, confidence)
    k, coverage = chosen
    low, high = float(ratios[k - 1]), float(ratios[n - k])
    return Verdict(point, low, high, coverage, n, noise, confidence)


# ---------------------------------------------------------------------- two unpaired samples


@functools.cache
def _mann_whitney_cdf(n: int, m: int) -> tuple[float, ...]:
    """P(U <= u) for u = 0..n·m under the null (no shift), exact: counts of the ways U can be
    reached, by the classic recursion on the largest value's sample."""
    counts: dict[tuple[int, int], list[int]] = {}

    def ways(a: int, b: int) -> list[int]:
        if a == 0 or b == 0:
            return [1]
        key = (a, b)
        if key not in counts:
            x, y = ways(a - 1, b), ways(a, b - 1)  # the largest value is an a or a b
            out = [0] * (a * b + 1)
            for u, c in enumerate(x):
                out[u + b] += c  # an a above every b adds b to U
            for u, c in enumerate(y):
                out[u] += c
            counts[key] = out
        return counts[key]

    w = ways(n, m)
    total = sum(w)
    acc, cdf = 0, []
    for c in w:
        acc += c
        cdf.append(acc / total)
    return tuple(cdf)


def shift_interval(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, confidence: float = 0.95
) -> tuple[float, float, float, float]:
    """Hodges-Lehmann shift b - a of two independent samples with its distribution-free
    interval (Mann-Whitney, exact for up to 60 values a side): ``(estimate, low, high,
    coverage)``; NaN bounds and coverage when the samples are too small for ``confidence``
    (fewer than 4 values a side at 95 %). The coverage holds when b is a shifted a (same
    spread); runs of two sessions on one quiet machine are close to that."""
    av = np.asarray(a, dtype=np.float64).ravel()
    bv = np.asarray(b, dtype=np.float64).ravel()
    diffs = np.sort((bv[:, None] - av[None, :]).ravel())
    nan = float("nan")
    if not diffs.size:
        return nan, nan, nan, nan
    half = diffs.size // 2  # the median of the sorted differences
    estimate = float(diffs[half] if diffs.size % 2 else (diffs[half - 1] + diffs[half]) / 2)
    k, coverage = _shift_rank(av.size, bv.size, confidence)
    if k == 0:
        return estimate, nan, nan, nan
    return estimate, float(diffs[k - 1]), float(diffs[-k]), coverage


@functools.lru_cache(maxsize=256)
def _shift_rank(n: int, m: int, confidence: float) -> tuple[int, float]:
    """The rank k of :func:`shift_interval`'s bounds [d_(k), d_(nm-k+1)] (ranks from 1) and
    their coverage, 1 - 2·P(U <= k-1): exact up to 60 values a side, the normal approximation
    of U beyond (its coverage then the confidence asked); k 0 when none reaches it. Once per
    sample sizes (a merge asks for thousands of cells of the same sizes)."""
    if n > 60 or m > 60:  # normal approximation of U
        z = 1.959963984540054 if confidence == 0.95 else float(_z(confidence))
        k = int(n * m / 2 - z * math.sqrt(n * m * (n + m + 1) / 12))
        return (k, confidence) if k >= 1 else (0, math.nan)
    cdf = _mann_whitney_cdf(n, m)
    k = 0
    while k + 1 < len(cdf) and 1 - 2 * cdf[k] >= confidence:
        k += 1
    return (k, 1 - 2 * cdf[k - 1]) if k else (0, math.nan)


def _z(confidence: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2)


def against_first(
    medians: np.ndarray, labels: Sequence[str], failed: Collection[int] = ()
) -> dict[int, tuple[Verdict, str]]:
    """Per column of ``medians`` (rounds x variants, interleaved) except the ``failed`` ones
    (variants the worker could not run): its verdict against column 0 and the sentence ortlab
    prints ('baseline' for column 0 itself), by column index."""
    m = np.asarray(medians, dtype=np.float64)
    out = {}
    for k, label in enumerate(labels):
        if k in failed:
            continue
        v = paired_ratio(m[:, 0], m[:, k])
        out[k] = (v, "baseline" if k == 0 else v.text(labels[0], label))
    return out


def plan_rounds(
    items: int, per_run_s: float, available_s: float, max_rounds: int
) -> tuple[int, int]:
    """Runs per measurement and interleaved rounds (at most ``max_rounds``, at least 2: one
    A B, one B A) of ``items`` that fit ``available_s`` at ``per_run_s`` a run. About 30 ms
    of runs per measurement; runs are cut before rounds, as a verdict needs MIN_ROUNDS rounds
    (a slow model keeps 2 runs, a fast one 3)."""
    floor = 2 if per_run_s >= 0.02 else 3
    runs = int(min(max(math.ceil(0.03 / per_run_s), floor), 200))

    def fit(r: int) -> int:
        return int(available_s / max(items * r * per_run_s, 1e-6))

    rounds = fit(runs)
    while rounds < MIN_ROUNDS and runs > floor:
        runs = max(runs // 2, floor)
        rounds = fit(runs)
    return runs, max(min(rounds, max_rounds), 2)


def theil_sen(
    y: Sequence[float] | np.ndarray, confidence: float = 0.95
) -> tuple[float, float, float]:
    """The slope of ``y`` against its index (per step) as Theil and Sen estimate it: the median
    of the slopes between every pair of points, with Sen's distribution-free interval (the
    ranks of the pairwise slopes Kendall's S bounds, by its normal approximation). Robust to
    the steps a resident set grows in (an arena extends by doubling). Assumes the points'
    noise independent: a slow drift shared by neighbours makes the interval narrower than it
    should be. (slope, low, high); NaNs below 3 points."""
    v = np.asarray(y, dtype=float)
    n = len(v)
    if n < 3:
        return math.nan, math.nan, math.nan
    i, j = np.triu_indices(n, k=1)
    slopes = np.sort((v[j] - v[i]) / (j - i))
    pairs = len(slopes)
    c = _z(confidence) * math.sqrt(n * (n - 1) * (2 * n + 5) / 18)
    lo = max(math.floor((pairs - c) / 2), 0)
    hi = min(math.ceil((pairs + c) / 2), pairs - 1)
    return float(np.median(slopes)), float(slopes[lo]), float(slopes[hi])
