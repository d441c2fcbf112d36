"""``ortlab.throughput``: requests/s and latency percentiles per concurrency level, threads
sharing one session and one session per thread, the curve and its knee, with intervals.

Measured in the worker (:mod:`ortlab.engine.tasks_throughput`): for each mode and concurrency
c, c threads issue ``run`` (ORT releases the GIL) for a fixed window; every (mode, c) item is
timed once per round, rounds interleaved forward and reversed so drift hits all of them.
Requests/s of a window is its completed requests over its length. Per level, the median over
rounds carries the distribution-free interval of :func:`ortlab.core.stats.median_interval` (a
pair of order statistics whose coverage follows from the binomial distribution alone); level
against level is :func:`ortlab.core.stats.paired_ratio` on the per-round requests/s (the
sign-test interval of the median per-round ratio). Latency percentiles pool every request.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Unpack

import numpy as np

from ortlab.core.config import SessionConfig
from ortlab.core.errors import OrtlabError
from ortlab.core.machine import (
    BUSY_CORES,
    environment,
    load_sentence,
    measured_load,
    physical_cores,
)
from ortlab.core.model import ModelLike
from ortlab.core.result import Result, Table, table
from ortlab.core.stats import (
    MIN_ROUNDS,
    Paired,
    Verdict,
    interval_columns,
    median_with_interval,
    paired_ratio,
)
from ortlab.core.units import fmt_rate
from ortlab.engine import tasks_throughput
from ortlab.engine.calls import Reach, edge, run_model_task
from ortlab.engine.replies import ThroughputReply
from ortlab.engine.tasks_throughput import MODES

if TYPE_CHECKING:
    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike

__all__ = ["ConcurrencyError", "LevelRow", "ThroughputResult", "find_knee", "throughput"]

_PHRASE = {"shared": "sharing one session", "per_thread": "each with its own session"}


class ConcurrencyError(OrtlabError, ValueError):
    """Concurrency levels that are not positive integers, or a mode ortlab does not have."""


@dataclass(frozen=True)
class LevelRow:
    """One (mode, concurrency) level over every round. Requests/s are measured per round
    window; latencies are every request's own time, pooled over the rounds."""

    mode: str
    """``shared`` (c threads, one session) or ``per_thread`` (one session per thread)."""
    concurrency: int
    requests_per_s: float
    """Median over rounds of the window's completed requests over its length."""
    low: float
    """Interval of that median (order statistics of the rounds); NaN with too few rounds."""
    high: float
    per_round: list[float]
    """Requests/s of each round's window."""
    completed: list[int]
    """Requests each round's window completed."""
    window_s: list[float]
    """Each round's window length (release to the last request's end), seconds."""
    p50_ms: float
    p90_ms: float
    p99_ms: float
    requests: int
    """Requests measured in all (the percentiles' sample)."""
    sessions: int
    """Sessions the level's threads ran (1 shared, c per thread)."""
    vs_first: Paired
    """Requests/s over the mode's first level, paired per round (> 1: more throughput)."""
    vs_previous: Paired
    """Requests/s over the level before it in the same mode, paired per round."""


@dataclass(frozen=True)
class ThroughputResult(Result):
    """Requests/s and latency per concurrency level and mode, measured with intervals.

    ``to_pandas()``: the :attr:`levels` table. ``plot()``: requests/s against concurrency
    (with intervals) per mode; ``plot('latency')``: p50/p99 against concurrency.
    """

    model: str
    config: SessionConfig
    rows: list[LevelRow]
    knee: dict[str, int | None]
    """Per mode, the highest concurrency whose requests/s is measurably above the level before
    it (the first level when none is); None without enough rounds for an interval."""
    sentences: dict[str, str]
    """Per mode, the curve in words."""
    rounds: int
    duration_s: float
    cpu_count: int
    intra_op_threads: int
    sessions_built: int
    """Sessions the per-thread mode built (its largest concurrency)."""
    feeds: str = ""
    synthetic: bool | None = None
    notes: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)

    def to_pandas(self) -> Table:
        """The :attr:`levels` table: mode, concurrency, requests_per_s, low, high, p50_ms,
        p90_ms, p99_ms, vs_first, vs_previous (their ratios), requests, sessions."""
        return self.levels

    @table
    def levels(self) -> Table:
        """One row per (mode, concurrency level)."""
        import pandas as pd

        low, high = interval_columns("requests_per_s")
        return pd.DataFrame(
            [
                {
                    "mode": r.mode,
                    "concurrency": r.concurrency,
                    "requests_per_s": r.requests_per_s,
                    low: r.low,
                    high: r.high,
                    "p50_ms": r.p50_ms,
                    "p90_ms": r.p90_ms,
                    "p99_ms": r.p99_ms,
                    "vs_first": r.vs_first.ratio,
                    "vs_previous": r.vs_previous.ratio,
                    "requests": r.requests,
                    "sessions": r.sessions,
                }
                for r in self.rows
            ]
        )

    def __repr__(self) -> str:
        return f"<ThroughputResult {self.model!r}: " + "; ".join(self.sentences.values()) + ">"


def concurrency_levels(values: object) -> list[int]:
    """Positive integers, deduplicated and sorted; anything else is a :class:`ConcurrencyError`."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ConcurrencyError(f"concurrency must be a list of positive integers, not {values!r}")
    out = set()
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ConcurrencyError(
                f"concurrency levels must be positive integers (threads), got {v!r} in "
                f"{list(values)!r}; e.g. concurrency=[1, 2, 4]"
            )
        out.add(int(v))
    if not out:
        raise ConcurrencyError("concurrency needs at least one level, e.g. [1, 2, 4]")
    return sorted(out)


def find_knee(
    levels: Sequence[int], rates: Sequence[Sequence[float]]
) -> tuple[int | None, list[Verdict]]:
    """The knee of a curve of per-round requests/s (``rates[k][round]`` for ``levels[k]``):
    walking up from the first level, each level measurably above the knee so far (the paired
    interval of the per-round ratio beyond the noise band, above 1) becomes the knee, so no
    level past the knee adds measurable throughput over it (two small steps that add up to a
    gain move it: 1 → 4 measurably faster moves it to 4 even when 1 → 2 and 2 → 4 alone do
    not); None when the rounds are too few for intervals. Also the step verdicts (level k over
    level k-1, ratio > 1 meaning more throughput)."""
    steps = [paired_ratio(rates[k - 1], rates[k]) for k in range(1, len(levels))]
    if any(not s.enough for s in steps) or (not steps and len(rates[0]) < MIN_ROUNDS):
        return None, steps
    knee = 0
    for k in range(1, len(levels)):
        v = paired_ratio(rates[knee], rates[k])
        if v.significant and v.ratio > 1:
            knee = k
    return levels[knee], steps


def _ci(v: Verdict) -> str:
    if not v.enough:
        return f"{v.ratio:.2f}x (no interval: too few rounds)"
    return f"{v.ratio:.2f}x [{v.low:.2f}, {v.high:.2f}]"


def _sentence(mode: str, rows: list[LevelRow], knee: int | None, rates: list[list[float]]) -> str:
    levels = [r.concurrency for r in rows]
    first = levels[0]
    if knee is None:
        return (
            f"{_PHRASE[mode]}: not enough rounds for intervals (need >= {MIN_ROUNDS}); "
            + ", ".join(f"{r.concurrency}: {fmt_rate(r.requests_per_s, 'req/s')}" for r in rows)
        )
    k = levels.index(knee)
    head = (
        f"{knee} thread{'s' if knee > 1 else ''} {_PHRASE[mode]}: "
        f"{fmt_rate(rows[k].requests_per_s, 'req/s')}"
    )
    if k > 0:
        head += f", {_ci(paired_ratio(rates[0], rates[k]))} the requests/s of {first}"
    if k == len(rows) - 1:
        return head + ("" if len(rows) > 1 else " (one level: no curve)")
    last = rows[-1]
    v = paired_ratio(rates[k], rates[-1])
    p99 = last.p99_ms / rows[k].p99_ms - 1 if rows[k].p99_ms > 0 else math.nan
    if v.significant:
        more = "lowers throughput" if v.ratio < 1 else "still adds throughput"
    elif v.holds_one or not v.enough:
        more = "adds no measurable throughput"
    else:  # the interval excludes 1 and reaches into the noise band
        more = "lowers throughput a little" if v.ratio < 1 else "adds a little throughput"
    return head + (f"; {last.concurrency} {more} ({_ci(v)}) and {p99:+.0%} p99 latency")


def _pct(lat_ns: list[int]) -> tuple[float, float, float]:
    if not lat_ns:
        return math.nan, math.nan, math.nan
    p = np.percentile(np.asarray(lat_ns, dtype=np.float64) / 1e6, [50, 90, 99])
    return float(p[0]), float(p[1]), float(p[2])


def _paired(v: Verdict, a: int, b: int) -> Paired:
    if a == b:
        return Paired.of(v, "baseline")
    return Paired.of(v, f"{b} vs {a}: {_ci(v)} the requests/s")


def _mode_rows(
    reply: ThroughputReply, mode: str, levels: list[int]
) -> tuple[list[LevelRow], int | None, str]:
    rates: list[list[float]] = []
    rows: list[LevelRow] = []
    for c in levels:
        ws = sorted(
            (w for w in reply.windows if w.mode == mode and w.concurrency == c),
            key=lambda w: w.round,
        )
        per_round = [w.completed / (w.window_ns / 1e9) for w in ws]
        rates.append(per_round)
        mid, low, high, _ = median_with_interval(per_round)
        p50, p90, p99 = _pct([x for w in ws for x in w.latencies_ns])
        k = len(rates) - 1
        rows.append(
            LevelRow(
                mode=mode,
                concurrency=c,
                requests_per_s=mid,
                low=low,
                high=high,
                per_round=per_round,
                completed=[w.completed for w in ws],
                window_s=[w.window_ns / 1e9 for w in ws],
                p50_ms=p50,
                p90_ms=p90,
                p99_ms=p99,
                requests=sum(w.completed for w in ws),
                sessions=ws[0].sessions if ws else 0,
                vs_first=_paired(paired_ratio(rates[0], per_round), levels[0], c),
                vs_previous=_paired(
                    paired_ratio(rates[max(k - 1, 0)], per_round), levels[max(k - 1, 0)], c
                ),
            )
        )
    knee, _ = find_knee(levels, rates)
    return rows, knee, _sentence(mode, rows, knee, rates)


def _notes(reply: ThroughputReply, cfg: SessionConfig, levels: list[int]) -> list[str]:
    cores, intra = physical_cores(), cfg.intra_op_threads
    per_run = cores if intra == 0 else intra
    setting = f"intra_op_threads={intra}" + (
        " (ORT's default: one per physical core)" if intra == 0 else ""
    )
    notes = [
        f"This machine has {cores} physical cores ({reply.cpu_count} logical CPUs); each "
        f"session runs with {setting}, so "
        f"{max(levels)} concurrent requests ask for up to {max(levels) * per_run} "
        "intra-op threads."
    ]
    if max(levels) * per_run > cores:
        fit = max(cores // per_run, 1)
        notes.append(
            f"With more than {fit} concurrent request{'s' if fit > 1 else ''} the threads "
            "contend for the cores (oversubscribed): for throughput serving, try "
            f"intra_op_threads=1 and about {cores} concurrent requests."
        )
    return notes


def throughput(
    model: ModelLike,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    concurrency: Sequence[int] = (1, 2, 4),
    modes: Sequence[str] = MODES,
    rounds: int = MIN_ROUNDS,
    duration_s: float = 0.5,
    warmup_s: float = 0.2,
    **reach: Unpack[Reach],
) -> ThroughputResult:
    """Requests/s and latency percentiles of ``model`` under ``config`` per concurrency level,
    like ``onnxruntime_perf_test -c``: for each mode (``shared``: c threads run one session;
    ``per_thread``: each thread its own session) and level c, c threads issue requests for
    ``duration_s``, every item once per round for ``rounds`` rounds (interleaved forward and
    reversed). Intervals need ``rounds >= 6`` (95 %): the median requests/s over rounds with an
    order-statistic interval, level against level a paired sign-test interval
    (:func:`ortlab.core.stats.paired_ratio`). The knee per mode is the highest level measurably
    above the one before it. The per-thread mode is refused when its sessions would not fit in
    the free memory.

    ``dims``, ``progress`` and ``timeout`` as every verb takes them (:class:`Reach`).
    """
    levels = concurrency_levels(concurrency)
    wanted = [m for m in MODES if m in set(modes)]
    if not wanted or set(modes) - set(MODES):
        raise ConcurrencyError(f"modes must be among {list(MODES)}, got {list(modes)!r}")
    if rounds < 1 or duration_s <= 0 or warmup_s < 0:
        raise ConcurrencyError(
            f"rounds must be >= 1, duration_s > 0 and warmup_s >= 0 (got rounds={rounds}, "
            f"duration_s={duration_s}, warmup_s={warmup_s})"
        )
    run = edge(model, config, feeds, **reach)
    m, cfg, f = run.model, run.config, run.inputs
    with measured_load() as load:
        reply = run_model_task(
            tasks_throughput.throughput,
            run,
            concurrency=levels,
            modes=wanted,
            rounds=rounds,
            duration_s=duration_s,
            warmup_s=warmup_s,
        )
    said_load = load_sentence(load.cores, reply.cpu_count)
    if load.cores is not None and load.cores > BUSY_CORES:  # spinning pools fight for cores
        said_load += (
            "; threads that spin (allow_spinning, ORT's default) lose most to a busy machine: "
            "requests/s here can be a fraction of an idle machine's"
        )
    rows: list[LevelRow] = []
    knee: dict[str, int | None] = {}
    sentences: dict[str, str] = {}
    for mode in wanted:
        got, knee[mode], sentences[mode] = _mode_rows(reply, mode, levels)
        rows.extend(got)
    return ThroughputResult(
        model=m.name,
        config=cfg,
        rows=rows,
        knee=knee,
        sentences=sentences,
        rounds=rounds,
        duration_s=duration_s,
        cpu_count=reply.cpu_count,
        intra_op_threads=cfg.intra_op_threads,
        sessions_built=reply.sessions_built,
        feeds=f.describe(),
        synthetic=f.synthetic,
        notes=[said_load, *f.notes, *_notes(reply, cfg, levels)],
        environment=environment(),
    )
