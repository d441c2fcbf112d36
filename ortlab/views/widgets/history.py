"""The Lab's history: every run a row, two runs side by side."""

from __future__ import annotations

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
        model_path (the file the run used), p50_ms, p90_ms, mean_ms, providers, fallback,
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

    def run(self, number: int) -> RunRecord:
        """The record of run ``number`` (1-based, as in the table)."""
        for r in self.records:
            if r.run == number:
                return r
        raise KeyError(f"No run {number}; runs so far: {[r.run for r in self.records]}.")

    def __len__(self) -> int:
        return len(self.records)
