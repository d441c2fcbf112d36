"""Latency benchmarks: warm-up, N runs or a duration, profiling off, timed inside the worker."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Unpack

import numpy as np

from ortlab.core.config import SessionConfig
from ortlab.core.machine import BUSY_CORES, environment, measured_load
from ortlab.core.model import ModelLike
from ortlab.core.result import Result, Table
from ortlab.core.run import Run
from ortlab.core.stats import (
    LatencyStats,
    Paired,
    latency_stats,
    median_with_interval,
    spread,
)
from ortlab.core.units import fmt_ms
from ortlab.engine import tasks_timing
from ortlab.engine.calls import (
    Reach,
    as_config,
    edge,
    measure_interleaved,
    run_model_task,
)
from ortlab.engine.session import SessionReport

if TYPE_CHECKING:
    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike

__all__ = ["BenchmarkResult", "ConfigComparison", "benchmark", "compare_configs", "environment"]


@dataclass(frozen=True)
class BenchmarkResult(Result):
    """Latency of one model under one SessionConfig. Times in ms unless named ``_ns``.

    ``plot(kind)``: 'distribution' (histogram with percentiles, the default) or 'runs'
    (latency per run).
    """

    model: str
    config: SessionConfig
    latencies_ns: list[int]
    """Every measured run, in order (warm-up excluded)."""
    stats: LatencyStats
    warmup: int
    report: SessionReport
    feeds: str
    """The feeds' names, dtypes and shapes (and how symbolic dims were chosen)."""
    environment: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    ort_ms: float | None = None
    """Wall time inside ORT's own calls: the session build (0 when a session built earlier
    was reused) and every run, warm-up included. The rest of the call is ortlab's. None when
    not measured."""
    other_cores: float | None = None
    """Cores other processes used on average during the call (of ``environment['cpu_count']``):
    the machine's load while these runs were timed. None when not measured."""
    cpu_ms_per_run: float = math.nan
    """CPU time per run over all the session's threads (the worker process's, measured over
    the timed runs): what a run costs in CPU, beside what it takes in wall time."""
    idle_cores: float = math.nan
    """Cores the session kept busy in the 0.2 s after its last run (its threads spinning for
    the next one, allow_spinning): what an idle service burns."""

    @property
    def cores_per_run(self) -> float:
        """CPU time per run over the mean run's wall time: the cores a run keeps busy."""
        return self.cpu_ms_per_run / self.stats.mean_ms if self.stats.mean_ms else math.nan

    @property
    def p50_interval(self) -> tuple[float, float, float]:
        """``(low_ms, high_ms, coverage)``: a distribution-free interval for the median run (a
        pair of order statistics whose coverage of at least 95 % follows from the binomial
        distribution alone); NaNs with fewer than 6 runs."""
        _, low, high, coverage = median_with_interval(np.asarray(self.latencies_ns) / 1e6)
        return low, high, coverage

    @property
    def busy(self) -> bool:
        """Other processes used more than a quarter of a core while this was timed."""
        return self.other_cores is not None and self.other_cores > BUSY_CORES

    def to_pandas(self) -> Table:
        """One row per measured run: ``run`` (0-based), ``latency_ms``."""
        import pandas as pd

        ms = np.asarray(self.latencies_ns, dtype=np.float64) / 1e6
        return pd.DataFrame({"run": np.arange(ms.size), "latency_ms": ms})

    def __repr__(self) -> str:
        s = self.stats
        return (
            f"<BenchmarkResult {self.model!r} [{self.config.label()}]: p50 "
            f"{fmt_ms(s.p50_ms)}, p90 {fmt_ms(s.p90_ms)}, mean {fmt_ms(s.mean_ms)} ± "
            f"{fmt_ms(s.std_ms)} "
            f"over {s.count} runs; {self.report.summary()}>"
        )


def benchmark(
    model: ModelLike,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    runs: int = 100,
    warmup: int = 10,
    duration_s: float | None = None,
    **reach: Unpack[Reach],
) -> BenchmarkResult:
    """Time ``runs`` runs of ``model`` under ``config`` (profiling off) in the worker.

    ``feeds`` default to :meth:`Model.example_inputs` with ``dims``. ``duration_s`` stops early
    once that much time has been measured. A progress bar shows unless ``progress=False``.

    ``dims``, ``progress`` and ``timeout`` as every verb takes them (:class:`Reach`).
    """
    run = edge(model, config, feeds, runs=runs, warmup=warmup, **reach)
    return benchmark_run(run, duration_s=duration_s)


def benchmark_run(run: Run, *, duration_s: float | None = None) -> BenchmarkResult:
    """:func:`benchmark`'s body, for a :class:`Run` resolved already."""
    with measured_load() as load:
        out = run_model_task(
            tasks_timing.benchmark,
            run,
            runs=run.runs,
            warmup=run.warmup,
            duration_s=duration_s,
        )
    lat = out.latencies_ns
    notes = list(run.inputs.notes)
    if out.cached_session:
        notes.append("reused a session built earlier in this worker (creation time is from then)")
    return BenchmarkResult(
        model=run.model.name,
        config=run.config,
        latencies_ns=lat,
        stats=latency_stats(lat),
        warmup=run.warmup,
        report=out.report,
        feeds=run.inputs.describe(),
        environment=environment(),
        notes=notes,
        ort_ms=out.ort_ms,
        other_cores=load.cores,
        cpu_ms_per_run=out.cpu_ns_per_run / 1e6,
        idle_cores=out.idle_cores,
    )


@dataclass(frozen=True)
class ConfigRow:
    label: str
    config: SessionConfig
    p50_ms: float
    p90_ms: float
    paired: Paired
    """Paired time ratio to the first config (median of per-round ratios; < 1 is faster)
    with its interval and verdict."""


@dataclass(frozen=True)
class ConfigComparison(Result):
    """Several SessionConfigs of one model, timed interleaved in one worker.

    ``plot()``: time ratio to the first config with its interval.
    """

    model: str
    rows: list[ConfigRow]
    rounds: int
    runs: int
    reports: list[SessionReport | None]
    """Per config, ORT's session report (None where the session could not be built)."""
    other_cores: float | None = None
    """Cores other processes used while the rounds ran (``core.machine.load_sentence``)."""
    notes: list[str] = field(default_factory=list)
    """How the rounds ran where it changes their reading (timed in pairs, …)."""

    def to_pandas(self) -> Table:
        """label, p50_ms, p90_ms, ratio (to the first), ratio_low, ratio_high, confidence,
        verdict."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "label": r.label,
                    "p50_ms": r.p50_ms,
                    "p90_ms": r.p90_ms,
                    **spread(r.paired),
                }
                for r in self.rows
            ]
        )

    def __repr__(self) -> str:
        return (
            f"<ConfigComparison {self.model!r}: "
            + "; ".join(r.paired.verdict for r in self.rows[1:])
            + ">"
        )


def compare_configs(
    model: ModelLike,
    configs: list[ConfigLike],
    feeds: FeedsLike | None = None,
    *,
    rounds: int = 10,
    runs: int = 10,
    **reach: Unpack[Reach],
) -> ConfigComparison:
    """Time ``configs`` of ``model`` interleaved (A B C, C B A …) in one worker and compare each
    with the first: a paired ratio with a distribution-free interval of at least 95 % (6 rounds
    or more), and "no measurable difference"
    when the interval stays within the noise band.

    ``dims``, ``progress`` and ``timeout`` as every verb takes them (:class:`Reach`).
    """

    if len(configs) < 2:
        raise ValueError("compare_configs needs at least two configs (the first is the baseline)")
    run = edge(model, configs[0], feeds, runs=runs, **reach)
    m = run.model
    cfgs = [as_config(c) for c in configs]
    timed = measure_interleaved(
        [(m, c) for c in cfgs],
        run,
        rounds=rounds,
        desc=f"compare {m.name}",
        context=f"of {m.name!r} ({len(cfgs)} configs)",
    )
    labels = [c.label() for c in cfgs]
    failed = timed.failed
    verdicts = timed.verdicts(labels)
    rows = []
    for k, c in enumerate(cfgs):
        if k in failed:
            rows.append(_failed_row(labels[k], c, failed[k]))
            continue
        v, text = verdicts[k]
        s = latency_stats(timed.latencies_ns[k])
        rows.append(
            ConfigRow(
                label=labels[k],
                config=c,
                p50_ms=s.p50_ms,
                p90_ms=s.p90_ms,
                paired=Paired.of(v, text),
            )
        )
    return ConfigComparison(
        model=m.name,
        rows=rows,
        rounds=rounds,
        runs=runs,
        reports=timed.reports,
        other_cores=timed.other_cores,
        notes=list(timed.notes),
    )


def _failed_row(label: str, config: SessionConfig, why: str) -> ConfigRow:
    nan = float("nan")
    return ConfigRow(label, config, nan, nan, Paired.untimed(f"failed: {why}"))
