"""Latency statistics and honest comparisons.

Every "A is faster than B" ortlab prints comes from :func:`paired_ratio`: runs of A and B
interleaved (A B B A …) so machine drift hits both, the ratio taken per round, and a bootstrap
confidence interval of the median ratio. When the interval contains 1 (or the change is smaller
than ``noise``) the verdict is "no measurable difference".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["LatencyStats", "Verdict", "latency_stats", "paired_ratio"]


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
    throughput_per_s: float
    """Runs per second, from the mean latency (one run after another)."""


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
        throughput_per_s=1e3 / mean if mean > 0 else float("nan"),
    )


@dataclass(frozen=True)
class Verdict:
    """Median of per-round ratios B/A with a bootstrap confidence interval."""

    ratio: float
    """Median of per-round (B / A); < 1 means B is faster."""
    low: float
    high: float
    confidence: float
    rounds: int
    noise: float

    @property
    def significant(self) -> bool:
        """The whole interval is beyond the noise band on one side of 1."""
        return self.high < 1 - self.noise or self.low > 1 + self.noise

    def speedup(self) -> float:
        return 1.0 / self.ratio if self.ratio > 0 else float("nan")

    def text(self, a: str = "A", b: str = "B") -> str:
        ci = (
            f"{self.ratio:.3f}x [{self.low:.3f}, {self.high:.3f}] "
            f"({self.confidence:.0%} CI, {self.rounds} rounds)"
        )
        if self.rounds < 3:
            return f"{b} vs {a}: {ci}; too few rounds for a verdict"
        if not self.significant:
            return f"{b} vs {a}: no measurable difference, {ci}"
        if self.ratio < 1:
            return f"{b} is {self.speedup():.2f}x faster than {a}: time ratio {ci}"
        return f"{b} is {self.ratio:.2f}x slower than {a}: time ratio {ci}"

    def __str__(self) -> str:
        return self.text()


def paired_ratio(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    noise: float = 0.02,
    seed: int = 0,
) -> Verdict:
    """Verdict on per-round times ``a[i]``, ``b[i]`` measured interleaved in round ``i``."""
    av = np.asarray(a, dtype=np.float64)
    bv = np.asarray(b, dtype=np.float64)
    if av.shape != bv.shape or av.ndim != 1:
        raise ValueError("paired_ratio needs two 1-D sequences of the same length (one per round)")
    ratios = bv / av
    point = float(np.median(ratios))
    if ratios.size < 2:
        return Verdict(point, point, point, confidence, int(ratios.size), noise)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, ratios.size, size=(resamples, ratios.size))
    boots = np.median(ratios[idx], axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(boots, [alpha, 1 - alpha])
    return Verdict(point, float(low), float(high), confidence, int(ratios.size), noise)


def against_first(medians: np.ndarray, labels: Sequence[str]) -> list[tuple[Verdict, str]]:
    """Per column of ``medians`` (rounds x variants, interleaved): its verdict against column 0
    and the sentence ortlab prints ('baseline' for column 0 itself)."""
    m = np.asarray(medians, dtype=np.float64)
    out = []
    for k, label in enumerate(labels):
        v = paired_ratio(m[:, 0], m[:, k])
        out.append((v, "baseline" if k == 0 else v.text(labels[0], label)))
    return out
