"""Run against run, per node: what changed between two placements ortlab measured.

For every original node present in both runs: its time per run in each (the placement join's
attribution, run by run from the profile), the shift B - A with a distribution-free interval
(Hodges-Lehmann / Mann-Whitney over the profiled runs; two sessions are independent samples,
not paired rounds), the EP it moved from/to and the kernel (final-graph op) that computed it
in each. Nodes only one run has (a quantized variant's QDQ nodes) are listed as such.

Per-node intervals are each 95 %: among hundreds of unchanged nodes about 1 in 20 would be
flagged by chance; ``summary()`` says how many were flagged against that expectation.

Two sessions run at different times: a change of the whole machine (load, clock) shifts every
node alike. ``summary()['run_ratio']`` is B's median run time over A's, and each node's
``vs_run`` is its own ratio over that one (1.0: it changed like the whole run), so a node that
stands out reads as such.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from ortlab.analysis.placement.result import PlacementResult
from ortlab.core.eps import alias
from ortlab.core.result import Result, Table, table
from ortlab.core.stats import NOISE_BAND, shift_interval

__all__ = ["TIMED_VERDICTS", "WITHIN_NOISE", "DiffResult", "NodeDiff", "diff"]

ABS_FLOOR_US = 1.0
"""ORT's profiler records whole microseconds: shifts within 1 µs are not measurable."""
WITHIN_NOISE = "within noise"
"""A shift whose interval excludes no change but not the noise floor (1 µs, or 2 % of A's
time): real, perhaps, and too small to call; never "no measurable difference", which an
interval holding 0 alone may say."""
TIMED_VERDICTS = ("slower", "faster", WITHIN_NOISE, "no measurable difference")


@dataclass(frozen=True)
class NodeDiff:
    node: str
    op_type: str
    a_us: float
    """Median µs per run in A (the join's attribution: a fused node's kernel time goes to the
    node it computes, a compiled subgraph's is split evenly)."""
    b_us: float
    delta_us: float
    """Hodges-Lehmann estimate of B - A (µs per run)."""
    low: float
    high: float
    verdict: str
    """'slower', 'faster', 'within noise', 'no measurable difference', 'too few runs', 'only in A',
    'only in B', 'not timed' (folded away in both)."""
    a_provider: str
    b_provider: str
    moved: bool
    a_kernel: str
    """Final-graph op type(s) that computed it in A."""
    b_kernel: str
    kernel_changed: bool
    vs_run: float = float("nan")
    """(b_us / a_us) / (B's median run time / A's): 1.0 when the node changed like the run."""


class DiffSummary(TypedDict):
    """A diff's counts (:meth:`DiffResult.summary`): nodes, the whole run's ratio B / A, the
    nodes timed in both, slower, faster, the slower or faster expected by chance (None without
    an interval coverage), flagged, moved EP, changed kernel, only in A, only in B."""

    nodes: int
    run_ratio: float
    timed_in_both: int
    slower: int
    faster: int
    by_chance_expected: float | None
    flagged: int
    moved_ep: int
    kernel_changed: int
    only_in_a: int
    only_in_b: int


@dataclass(frozen=True)
class DiffResult(Result):
    """``nodes`` (``to_pandas()``): one row per original node; ``summary()``; ``plot()``."""

    model_a: str
    model_b: str
    label_a: str
    label_b: str
    rows: list[NodeDiff]
    runs_a: int
    runs_b: int
    coverage: float
    """The per-node intervals' coverage (NaN when the runs are too few for 95 %)."""
    run_ratio: float = float("nan")
    """B's median run time / A's (whole runs, as the profiles recorded them)."""
    notes: list[str] = field(default_factory=list)

    @table
    def nodes(self) -> Table:
        import pandas as pd

        return pd.DataFrame([r.__dict__ for r in self.rows])

    def to_pandas(self) -> Table:
        """node, op_type, a_us, b_us, delta_us, low, high, verdict, a_provider, b_provider,
        moved, a_kernel, b_kernel, kernel_changed; largest |delta| first."""
        t = self.nodes
        return t.reindex(t["delta_us"].abs().sort_values(ascending=False).index).reset_index(
            drop=True
        )

    def summary(self) -> DiffSummary:
        verdicts = [r.verdict for r in self.rows]
        timed = sum(v in TIMED_VERDICTS for v in verdicts)
        flagged = sum(v in ("slower", "faster") for v in verdicts)
        return {
            "nodes": len(self.rows),
            "run_ratio": round(self.run_ratio, 3),
            "timed_in_both": timed,
            "slower": verdicts.count("slower"),
            "faster": verdicts.count("faster"),
            "by_chance_expected": round((1 - self.coverage) * timed, 1)
            if not np.isnan(self.coverage)
            else None,
            "flagged": flagged,
            "moved_ep": sum(r.moved for r in self.rows),
            "kernel_changed": sum(r.kernel_changed for r in self.rows),
            "only_in_a": verdicts.count("only in A"),
            "only_in_b": verdicts.count("only in B"),
        }

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"<DiffResult {self.label_a!r} -> {self.label_b!r}: whole run x{s['run_ratio']}; "
            f"{s['slower']} nodes slower, "
            f"{s['faster']} faster of {s['timed_in_both']} timed in both (about "
            f"{s['by_chance_expected']} would be flagged by chance); {s['moved_ep']} moved EP, "
            f"{s['kernel_changed']} changed kernel>"
        )


def _per_run(pl: PlacementResult) -> tuple[dict[str, np.ndarray], int]:
    """Original node -> its µs in each profiled run (the join's attribution, run by run)."""
    if pl.profile is None:
        raise ValueError(
            "This placement carries no profile (a what-if prediction, or loaded from an old "
            "file): diff needs two placements ortlab measured (ortlab.placement)."
        )
    grid = pl.profile.per_run()
    runs = grid.shape[1]
    index = {name: k for k, name in enumerate(pl.profile.data.node)}
    out = {}
    for r in pl.node_rows:
        opt = [index[o] for o in r.optimized if o in index]
        if not opt or r.group_us_per_run <= 0:
            continue
        out[r.node] = grid[opt].sum(axis=0) * (r.us_per_run / r.group_us_per_run)
    return out, runs


def _kernels(pl: PlacementResult) -> dict[str, str]:
    ops = {r.node: r.op_type for r in pl.optimized_rows}
    return {
        r.node: "+".join(dict.fromkeys(ops.get(o, "?") for o in r.optimized)) for r in pl.node_rows
    }


def _verdict(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float, str, float]:
    est, low, high, coverage = shift_interval(a, b)
    if np.isnan(low):  # too few runs
        return est, low, high, "too few runs", coverage
    floor = max(ABS_FLOOR_US, NOISE_BAND * float(np.median(a)))
    if low > floor:
        return est, low, high, "slower", coverage
    if high < -floor:
        return est, low, high, "faster", coverage
    if low > 0 or high < 0:  # the interval excludes no change, but not the noise floor
        return est, low, high, WITHIN_NOISE, coverage
    return est, low, high, "no measurable difference", coverage


def _pooled(
    side: Sequence[PlacementResult], per_session: bool
) -> tuple[dict[str, np.ndarray], int, list[float]]:
    """The per-run node times of several placements of one setup (rounds), pooled: each
    node's runs end to end, and every run's time; ``per_session``, each placement's median
    run instead (one value per session)."""
    times: dict[str, list[np.ndarray]] = {}
    runs, run_us = 0, []
    for pl in side:
        t, n = _per_run(pl)
        runs += 1 if per_session else n
        for node, x in t.items():
            times.setdefault(node, []).append(np.median(x, keepdims=True) if per_session else x)
        ran = list(pl.profile.data.run_us) if pl.profile else []
        run_us += [float(np.median(ran))] if per_session and ran else ran
    return {k: np.concatenate(v) for k, v in times.items()}, runs, run_us


def diff(
    a: PlacementResult | Sequence[PlacementResult],
    b: PlacementResult | Sequence[PlacementResult],
    *,
    labels: tuple[str, str] | None = None,
    per_session: bool = False,
) -> DiffResult:
    """Per original node, B against A: time shift with its interval, EP moved, kernel
    changed. ``a`` and ``b`` are two ``ortlab.placement`` results (threads, levels, fp32 vs
    int8, CPU vs an EP); each needs at least 4 profiled runs for a 95 % interval. Either may
    be a list of placements of one setup taken in rounds (``version_diff`` interleaves them):
    their runs are pooled, and the first gives the node's EP and kernel. ``per_session``:
    the samples are the sessions (each placement's median run), not the runs: the interval
    then holds a session-to-session change too (a fresh session's memory layout, a burst of
    load on the machine), and needs at least 4 placements a side."""
    side_a = list(a) if isinstance(a, Sequence) else [a]
    side_b = list(b) if isinstance(b, Sequence) else [b]
    placements = [*side_a, *side_b]
    if not side_a or not side_b or not all(isinstance(p, PlacementResult) for p in placements):
        raise TypeError(
            "diff compares two ortlab.placement(...) results (each carries its per-run "
            f"profile); got {type(a).__name__} and {type(b).__name__}."
        )
    a, b = side_a[0], side_b[0]
    ta, runs_a, run_us_a = _pooled(side_a, per_session)
    tb, runs_b, run_us_b = _pooled(side_b, per_session)
    rows_a = {r.node: r for r in a.node_rows}
    rows_b = {r.node: r for r in b.node_rows}
    ka, kb = _kernels(a), _kernels(b)
    out: list[NodeDiff] = []
    coverage = float("nan")
    for name in [*rows_a, *(n for n in rows_b if n not in rows_a)]:
        ra, rb = rows_a.get(name), rows_b.get(name)
        base = ra or rb
        assert base is not None
        if ra is None or rb is None:
            side = "only in B" if ra is None else "only in A"
            us = (rb or ra).us_per_run if (rb or ra) else 0.0  # type: ignore[union-attr]
            out.append(
                NodeDiff(
                    name,
                    base.op_type,
                    0.0 if ra is None else us,
                    0.0 if rb is None else us,
                    float("nan"),
                    float("nan"),
                    float("nan"),
                    side,
                    ra.provider if ra else "",
                    rb.provider if rb else "",
                    False,
                    ka.get(name, ""),
                    kb.get(name, ""),
                    False,
                )
            )
            continue
        xa, xb = ta.get(name), tb.get(name)
        if xa is None or xb is None:
            est = low = high = float("nan")
            verdict = "not timed"
        else:
            est, low, high, verdict, cov = _verdict(xa, xb)
            coverage = coverage if np.isnan(cov) else cov
        out.append(
            NodeDiff(
                node=name,
                op_type=base.op_type,
                a_us=float(np.median(xa)) if xa is not None else 0.0,
                b_us=float(np.median(xb)) if xb is not None else 0.0,
                delta_us=est,
                low=low,
                high=high,
                verdict=verdict,
                a_provider=ra.provider,
                b_provider=rb.provider,
                moved=bool(ra.provider and rb.provider and ra.provider != rb.provider),
                a_kernel=ka.get(name, ""),
                b_kernel=kb.get(name, ""),
                kernel_changed=ka.get(name, "") != kb.get(name, ""),
            )
        )
    run_ratio = (
        float(np.median(run_us_b) / np.median(run_us_a))
        if (run_us_a and run_us_b)
        else float("nan")
    )
    out = [
        dataclasses.replace(r, vs_run=(r.b_us / r.a_us) / run_ratio)
        if r.a_us > 0 and r.b_us > 0
        else r
        for r in out
    ]
    la, lb = labels or (_label(a), _label(b))
    unit = (
        "the sessions, each its median run" if per_session else "the profiled runs of each session"
    )
    return DiffResult(
        model_a=a.model,
        model_b=b.model,
        label_a=la,
        label_b=lb,
        rows=out,
        runs_a=runs_a,
        runs_b=runs_b,
        coverage=coverage,
        run_ratio=run_ratio,
        notes=[
            f"Each node's interval covers its true shift {coverage:.1%} of the time "
            f"(distribution-free, over {unit}); shifts within "
            f"{ABS_FLOOR_US:.0f} µs or {NOISE_BAND:.0%} of A's time are no measurable "
            "difference."
        ]
        if not np.isnan(coverage)
        else [
            f"Too few {'sessions' if per_session else 'profiled runs'} for a 95 % "
            f"interval: use {'rounds' if per_session else 'runs'} >= 4 on both sides."
        ],
    )


def _label(pl: PlacementResult) -> str:
    provs = pl.config.providers
    provs = provs if isinstance(provs, str) else "+".join(alias(p) for p in provs)
    return f"{pl.model} · {provs} · {pl.config.level}"
