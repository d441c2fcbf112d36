"""Latency benchmarks: warm-up, N runs or a duration, profiling off, timed inside the worker."""

from __future__ import annotations

import platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ortlab._result import Result
from ortlab.config import SessionConfig
from ortlab.engine import ModelLike, run_model_task
from ortlab.session import SessionReport
from ortlab.stats import LatencyStats, latency_stats

__all__ = ["BenchmarkResult", "benchmark", "environment"]


def environment() -> dict[str, str]:
    """ortlab/ORT/Python versions and the CPU, for results that travel."""
    import onnxruntime as ort

    from ortlab import __version__

    cpu = platform.processor() or platform.machine()
    try:
        with Path("/proc/cpuinfo").open() as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import os

    return {
        "ortlab": __version__,
        "onnxruntime": str(ort.__version__),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cpu_count": str(os.cpu_count()),
    }


@dataclass(frozen=True)
class BenchmarkResult(Result):
    """Latency of one model under one SessionConfig. Times in ms unless named ``_ns``."""

    model: str
    config: dict[str, Any]
    """The SessionConfig as a dict (``SessionConfig.from_json`` rebuilds it)."""
    latencies_ns: list[int]
    """Every measured run, in order (warm-up excluded)."""
    stats: LatencyStats
    warmup: int
    report: SessionReport
    feeds: str
    """The feeds' names, dtypes and shapes (and how symbolic dims were chosen)."""
    environment: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def session_config(self) -> SessionConfig:
        return SessionConfig.from_json(self.config)

    def to_pandas(self) -> Any:
        """One row per measured run: ``run`` (0-based), ``latency_ms``."""
        import pandas as pd

        ms = np.asarray(self.latencies_ns, dtype=np.float64) / 1e6
        return pd.DataFrame({"run": np.arange(ms.size), "latency_ms": ms})

    def __repr__(self) -> str:
        s = self.stats
        return (
            f"<BenchmarkResult {self.model!r} [{self.session_config.label()}]: p50 "
            f"{s.p50_ms:.3f} ms, p90 {s.p90_ms:.3f} ms, mean {s.mean_ms:.3f} ± {s.std_ms:.3f} ms "
            f"over {s.count} runs; {self.report.summary()}>"
        )

    def _repr_html_(self) -> str:
        from ortlab.render import benchmark_html

        return benchmark_html(self)

    def to_text(self) -> str:
        from ortlab.render import benchmark_text

        return benchmark_text(self)

    def plot(self, kind: str = "distribution") -> Any:
        """'distribution' (histogram with percentiles) or 'runs' (latency per run)."""
        from ortlab import plots

        return plots.benchmark_figure(self, kind)


def benchmark(
    model: ModelLike,
    config: SessionConfig | Mapping[str, Any] | None = None,
    feeds: Mapping[str, Any] | None = None,
    *,
    runs: int = 100,
    warmup: int = 10,
    duration_s: float | None = None,
    dims: Mapping[str, int] | None = None,
    progress: bool | Callable[[int, int], None] = True,
    timeout: float | None = None,
) -> BenchmarkResult:
    """Time ``runs`` runs of ``model`` under ``config`` (profiling off) in the worker.

    ``feeds`` default to :meth:`Model.example_inputs` with ``dims``. ``duration_s`` stops early
    once that much time has been measured. A progress bar shows unless ``progress=False``.
    """
    if runs < 1 or warmup < 0:
        raise ValueError(f"runs must be >= 1 and warmup >= 0 (got runs={runs}, warmup={warmup})")
    m, cfg, f, out = run_model_task(
        "benchmark",
        model,
        config,
        feeds,
        dims=dims,
        progress=progress,
        timeout=timeout,
        runs=runs,
        warmup=warmup,
        duration_s=duration_s,
    )
    lat = out["latencies_ns"]
    notes = list(f.notes)
    if out["cached_session"]:
        notes.append("reused a session built earlier in this worker (creation time is from then)")
    return BenchmarkResult(
        model=m.name,
        config=cfg.to_dict(),
        latencies_ns=lat,
        stats=latency_stats(lat),
        warmup=warmup,
        report=out["report"],
        feeds=f.describe(),
        environment=environment(),
        notes=notes,
    )
