"""The Lab's history: every run a row, two runs side by side."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ortlab.core.config import SessionConfig

__all__ = ["History", "RunRecord"]

_COLUMNS = [
    "run",
    "label",
    "variant",
    "shapes",
    "model_path",
    "p50_ms",
    "p50_low_ms",
    "p50_high_ms",
    "other_cores",
    "p90_ms",
    "mean_ms",
    "providers",
    "fallback",
    "seconds",
    "overhead_s",
]


@dataclass
class RunRecord:
    run: int
    config: SessionConfig
    variant: str
    """The Lab's variant ('none', 'static QDQ per-channel', "doctor's best: …")."""
    p50_ms: float
    p90_ms: float
    mean_ms: float
    providers: str
    fallback: str
    seconds: float
    ort_seconds: float = 0.0
    """Session builds plus every run ORT executed (warm-up included), from the results."""
    model_path: str = ""
    """The model file the run used: the variant's own file for a variant run."""
    shapes: str = ""
    """The shapes it ran at: ``dims batch=1,sequence=128`` or ``feeds input: float32[1, 512]``."""
    transformers: bool = False
    """The model went through the transformers optimizer first."""
    p50_low_ms: float = math.nan
    p50_high_ms: float = math.nan
    """The median run's distribution-free interval (``BenchmarkResult.p50_interval``)."""
    other_cores: float | None = None
    """Cores other processes used while the run was timed (``BenchmarkResult.other_cores``)."""
    benchmark: Any = field(repr=False, default=None)
    placement: Any = field(repr=False, default=None)

    @property
    def overhead_s(self) -> float:
        """Wall time of the refresh minus ORT's own time: ortlab's cost of the toggle."""
        return self.seconds - self.ort_seconds

    @property
    def label(self) -> str:
        """Everything that tells two runs apart: ``cpu · all · static QDQ per-channel ·
        transformers optimizer · dims batch=1``."""
        parts = [self.config.label()]
        if self.variant != "none":
            parts.append(self.variant)
        if self.transformers:
            parts.append("transformers optimizer")
        if self.shapes:
            parts.append(self.shapes)
        return " · ".join(parts)


class History:
    """Every run of a Lab, one row each. The full results (benchmark latencies, placement with
    its profile) are kept for the ``keep_results`` most recent runs; older rows keep their
    numbers and config, so a session of thousands of runs does not grow without bound."""

    def __init__(self, keep_results: int = 10) -> None:
        self.records: list[RunRecord] = []
        self.keep_results = keep_results

    def add(self, record: RunRecord) -> None:
        self.records.append(record)
        if len(self.records) > self.keep_results:
            old = self.records[-self.keep_results - 1]
            old.benchmark = old.placement = None

    def to_pandas(self) -> Any:
        """run, label (config, variant, transformers optimizer, shapes), variant, shapes,
        model_path (the file the run used), p50_ms with its interval (p50_low_ms, p50_high_ms),
        other_cores (the machine's load while it was timed), p90_ms, mean_ms, providers, fallback,
        seconds (wall time of the refresh), overhead_s (seconds minus session builds and
        runs)."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "run": r.run,
                    "label": r.label,
                    "variant": r.variant,
                    "shapes": r.shapes,
                    "model_path": r.model_path,
                    "p50_ms": r.p50_ms,
                    "p50_low_ms": r.p50_low_ms,
                    "p50_high_ms": r.p50_high_ms,
                    "other_cores": r.other_cores,
                    "p90_ms": r.p90_ms,
                    "mean_ms": r.mean_ms,
                    "providers": r.providers,
                    "fallback": r.fallback,
                    "seconds": r.seconds,
                    "overhead_s": r.overhead_s,
                }
                for r in self.records
            ],
            columns=_COLUMNS,
        )

    def compare(self, a: int, b: int) -> Any:
        """Two runs side by side with deltas (not interleaved: ortlab.compare_configs gives a
        verdict with uncertainty)."""
        import pandas as pd

        ra, rb = self.run(a), self.run(b)
        rows = [
            {
                "metric": k,
                f"run {ra.run}": getattr(ra, k),
                f"run {rb.run}": getattr(rb, k),
                "delta": getattr(rb, k) - getattr(ra, k),
                "ratio": getattr(rb, k) / getattr(ra, k) if getattr(ra, k) else float("nan"),
            }
            for k in ("p50_ms", "p90_ms", "mean_ms")
        ]
        return pd.DataFrame(rows)

    def swings(self) -> list[str]:
        """Runs of the same settings whose median runs differ beyond both intervals: the
        machine, not the settings, changed between them (with the load each was timed under)."""
        out = []
        by_label: dict[str, list[RunRecord]] = {}
        for r in self.records:
            by_label.setdefault(r.label, []).append(r)
        for label, runs in by_label.items():
            lo = min(runs, key=lambda r: r.p50_ms)
            hi = max(runs, key=lambda r: r.p50_ms)
            if lo is hi or not hi.p50_low_ms > lo.p50_high_ms:  # NaN intervals: no claim
                continue
            load = ""
            if lo.other_cores is not None and hi.other_cores is not None:
                load = (f"; other processes used {lo.other_cores:.2f} and {hi.other_cores:.2f} "
                        "cores")  # fmt: skip
            out.append(
                f"runs {lo.run} and {hi.run} ran the same settings ({label}) but their median "
                f"runs differ beyond both intervals ({lo.p50_ms:.3f} vs {hi.p50_ms:.3f} ms{load}): "
                "the machine changed, not the model; compare settings with "
                "ortlab.compare_configs (interleaved) rather than across History"
            )
        return out

    def run(self, number: int) -> RunRecord:
        """The record of run ``number`` (1-based, as in the table)."""
        for r in self.records:
            if r.run == number:
                return r
        raise KeyError(f"No run {number}; runs so far: {[r.run for r in self.records]}.")

    def __len__(self) -> int:
        return len(self.records)
