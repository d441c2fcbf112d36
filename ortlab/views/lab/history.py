"""The Lab's history: every run a row, two runs side by side."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ortlab.core.config import SessionConfig
from ortlab.core.machine import BUSY_CORES
from ortlab.core.units import fmt_interval, fmt_ms
from ortlab.views.figure import template
from ortlab.views.html import esc

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from ortlab.analysis.benchmark import BenchmarkResult
    from ortlab.analysis.labrun import LabRun
    from ortlab.analysis.placement.result import PlacementResult
    from ortlab.core.result import Table

__all__ = ["History", "RunRecord", "history_figure", "ort_seconds"]

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

    @classmethod
    def of(cls, run: int, done: LabRun, shapes: str, seconds: float) -> RunRecord:
        """The record of the Lab's ``run``-th run (``done``), at ``shapes``, that took
        ``seconds`` from the variant built to the results shown."""
        from ortlab.analysis.labrun import BEST
        from ortlab.core.eps import alias

        b, pl, choice = done.benchmark, done.placement, done.choice
        low, high, _ = b.p50_interval
        return cls(
            run=run,
            config=choice.config,
            variant=choice.variant_key,
            p50_ms=b.stats.p50_ms,
            p50_low_ms=low,
            p50_high_ms=high,
            other_cores=b.other_cores,
            p90_ms=b.stats.p90_ms,
            mean_ms=b.stats.mean_ms,
            providers=", ".join(alias(p) for p in b.report.active),
            fallback="; ".join(alias(m.provider) for m in b.report.missing),
            seconds=seconds,
            ort_seconds=ort_seconds(pl, b),
            model_path=str(done.model.path),
            shapes=shapes,
            transformers=choice.transformers and not choice.variant.startswith(BEST),
            benchmark=b,
            placement=pl,
        )

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


_COMPARED = ("p50_ms", "p90_ms", "mean_ms")
_DISAGREE = 0.1
"""Two ratios of one pair of runs that point opposite ways by more than this each disagree."""


@dataclass(frozen=True)
class Warnings:
    """Sentences shown in the warning colour (where two figures of a comparison disagree)."""

    lines: list[str]

    def _repr_html_(self) -> str:
        return "".join(f'<div class="ortlab-warn">{esc(n, 600)}</div>' for n in self.lines)

    def __repr__(self) -> str:
        return "\n".join(self.lines)


def _profiled_ms(r: RunRecord) -> float:
    """The run's median profiled run, ms (its placement's profile: profiler on), NaN if gone."""
    prof = getattr(r.placement, "profile", None)
    return float(prof.median_run_ms) if prof is not None else math.nan


def _load(r: RunRecord) -> float:
    return math.nan if r.other_cores is None else float(r.other_cores)


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

    def to_pandas(self) -> pd.DataFrame:
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

    def screen_table(self, last: int = 30) -> Table:
        """The History tab's table: the last ``last`` runs in the columns that fit the Lab at
        1280 px (the label holds the variant and the shapes; ``to_pandas`` has every column),
        the median's interval in one column, headers a person reads."""
        import pandas as pd

        rows = [
            {
                "run": r.run,
                "settings": r.label,
                "p50 [interval]": fmt_interval(r.p50_ms, r.p50_low_ms, r.p50_high_ms),
                "other cores": r.other_cores,
                "fallback": r.fallback,
                "refresh took": fmt_ms(r.seconds * 1e3),
            }
            for r in self.records[-last:]
        ]
        return pd.DataFrame(rows).set_index("run") if rows else pd.DataFrame()

    def compare(self, a: int, b: int) -> Table:
        """Two runs side by side with deltas (not interleaved: ortlab.compare_configs gives a
        verdict with uncertainty)."""
        import pandas as pd

        ra, rb = self.run(a), self.run(b)
        rows = [
            {
                "metric": k,
                f"run {ra.run}": va,
                f"run {rb.run}": vb,
                "delta": vb - va,
                "ratio": vb / va if va else float("nan"),
            }
            for k, va, vb in [(k, getattr(ra, k), getattr(rb, k)) for k in _COMPARED]
            + [
                ("profiled_run_ms", _profiled_ms(ra), _profiled_ms(rb)),
                ("other_cores", _load(ra), _load(rb)),
            ]
        ]
        return pd.DataFrame(rows)

    def comparison(self, a: int, b: int) -> list[object]:
        """What the History tab shows for runs ``a`` and ``b``: the table (:meth:`compare`),
        then, as HTML, where its figures disagree and why: the benchmark (profiling off) and
        the profiled runs (profiler on) that say opposite things, a load that changed."""
        notes = self.disagreements(a, b)
        if not notes:
            return [self.compare(a, b)]
        return [self.compare(a, b), Warnings(notes)]

    def disagreements(self, a: int, b: int) -> list[str]:
        """Sentences for what makes the two runs' figures disagree: their loads differ (by
        more than a quarter core), or the benchmark's p50 ratio and the profiled runs' ratio
        point opposite ways by more than 10 % each (one of them met a busier machine: five
        profiled runs of a tiny model wander a few per cent and are no such evidence)."""
        ra, rb = self.run(a), self.run(b)
        out = []
        la, lb = _load(ra), _load(rb)
        if not (math.isnan(la) or math.isnan(lb)) and abs(la - lb) > BUSY_CORES:
            out.append(
                f"the machine's load changed between them: other processes used {la:.2f} "
                f"cores during run {a} and {lb:.2f} during run {b}"
            )
        bench = rb.p50_ms / ra.p50_ms if ra.p50_ms else math.nan
        pa, pb = _profiled_ms(ra), _profiled_ms(rb)
        prof = pb / pa if pa else math.nan
        up, down = 1 + _DISAGREE, 1 - _DISAGREE
        if (bench > up and prof < down) or (bench < down and prof > up):
            out.append(
                f"the benchmark (profiling off) says run {b} takes x{bench:.2f} run {a}'s time, "
                f"the profiled runs (profiler on) x{prof:.2f}: they disagree, so the machine "
                "changed between the measurements"
            )
        if out:
            out.append(
                "runs of the History are timed minutes apart: compare their settings with "
                "ortlab.compare_configs, which times them interleaved with an interval"
            )
        return out

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
                load = f"; other processes used {lo.other_cores:.2f} and {hi.other_cores:.2f} cores"
            out.append(
                f"runs {lo.run} and {hi.run} ran the same settings ({label}) but their median "
                "runs differ beyond both intervals "
                f"({fmt_ms(lo.p50_ms)} vs {fmt_ms(hi.p50_ms)}{load}): "
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


def ort_seconds(pl: PlacementResult, b: BenchmarkResult) -> float:
    """ORT's own time in a refresh, as the worker timed its calls: both session builds (the
    benchmark's only if not reused), every run of both, warm-up included, and end_profiling."""
    if pl.ort_ms is None or b.ort_ms is None:  # not measured: no overhead to state
        return float("nan")
    return float(pl.ort_ms + b.ort_ms) / 1e3


def history_figure(t: Table) -> go.Figure:
    """The Lab's History: p50 per run with the median's interval as error bars and the other
    processes' load in the hover (``t``: ``History.to_pandas()``)."""
    import plotly.graph_objects as go

    err = {
        "type": "data",
        "symmetric": False,
        "array": t["p50_high_ms"] - t["p50_ms"],
        "arrayminus": t["p50_ms"] - t["p50_low_ms"],
        "thickness": 1,
    }
    load = [
        f"{c:.2f}" if isinstance(c, float) and math.isfinite(c) else "not measured"
        for c in t["other_cores"]
    ]
    fig = go.Figure(
        go.Scatter(
            x=t["run"],
            y=t["p50_ms"],
            mode="lines+markers",
            error_y=err,
            text=[esc(x) for x in t["label"]],
            customdata=load,
            hovertemplate="run %{x}: p50 %{y:.3f} ms<br>%{text}<br>"
            "other processes: %{customdata} cores",
        )
    )
    fig.update_layout(
        title="p50 latency across runs (bars: the median's ≥95 % interval; "
        "runs are not interleaved)",
        xaxis_title="run",
        yaxis_title="ms",
        template=template(),
        height=300,
    )
    if len(t):  # whole run numbers only (never 1, 1.2 … 2)
        lo, hi = float(t["run"].min()) - 0.5, float(t["run"].max()) + 0.5
        fig.update_xaxes(tickmode="linear", tick0=1, dtick=max(1, len(t) // 10), range=[lo, hi])
    return fig
