"""``ortlab.sweep``: how latency, placement and memory change with the input shape — one row per
shape, each measured (latency with the median's interval, ORT's placement, the allocator's peak)
and, for what-if targets, predicted (which shapes an accelerator would take).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ortlab.analysis.benchmark import benchmark_run
from ortlab.analysis.placement.measure import placement_run
from ortlab.analysis.placement.whatif import unconfigured, whatif_run
from ortlab.core.config import SessionConfig
from ortlab.core.errors import OrtlabError
from ortlab.core.model import ModelLike, load
from ortlab.core.result import Result, Table, table
from ortlab.core.run import Run
from ortlab.core.stats import median_with_interval
from ortlab.engine.calls import as_config, edge

if TYPE_CHECKING:
    from ortlab.core.config import ConfigLike

__all__ = ["MAX_POINTS", "SweepResult", "SweepRow", "sweep"]

MAX_POINTS = 64
"""Shapes one sweep measures at most (the product of the value lists)."""


class SweepError(OrtlabError, ValueError):
    """The dims asked for do not make a sweep."""


@dataclass(frozen=True)
class SweepRow:
    """One shape: measured latency (median with its 95 % order-statistic interval over the
    runs), placement and memory; predicted placement per what-if target."""

    dims: dict[str, int]
    p50_ms: float
    low_ms: float
    high_ms: float
    runs: int
    nodes_per_ep: dict[str, int] = field(default_factory=dict)
    fallbacks: int = 0
    """Original nodes not on the wanted EP (0 when only the CPU was asked for)."""
    memcpy: int = 0
    """Memcpy nodes ORT inserted between EPs."""
    peak_bytes: int = -1
    """The EP allocator's peak over a run, as ORT's profile recorded it (-1: not recorded)."""
    predicted: dict[str, float] = field(default_factory=dict)
    """Per what-if target: share of the original nodes it would take (predicted)."""
    error: str = ""
    """Why this shape could not be measured (the model refuses it); then no figures."""

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.dims.items())


@dataclass(frozen=True)
class SweepResult(Result):
    """Latency, placement and peak memory per input shape (measured), and the share of nodes
    each what-if target would take per shape (predicted).

    ``plot()``: latency with its interval against the swept shapes, peak memory on a second
    axis, and each target's predicted share.
    """

    model: str
    config: SessionConfig
    swept: dict[str, list[int]]
    rows: list[SweepRow]
    targets: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_pandas(self) -> Table:
        """The per-shape table (:attr:`shapes`): one column per swept dim, then p50_ms,
        low_ms, high_ms, runs, nodes per EP (``nodes:<EP>``), fallbacks, memcpy, peak_bytes,
        ``predicted:<target>`` shares, error."""
        return self.shapes

    @table
    def shapes(self) -> Table:
        import pandas as pd

        records = []
        for r in self.rows:
            rec: dict[str, Any] = dict(r.dims)
            rec.update(p50_ms=r.p50_ms, low_ms=r.low_ms, high_ms=r.high_ms, runs=r.runs)
            rec.update({f"nodes:{ep}": n for ep, n in r.nodes_per_ep.items()})
            rec.update(fallbacks=r.fallbacks, memcpy=r.memcpy, peak_bytes=r.peak_bytes)
            rec.update({f"predicted:{t}": s for t, s in r.predicted.items()})
            rec["error"] = r.error
            records.append(rec)
        return pd.DataFrame(records)

    def taken_by(self, target: str, share: float = 0.99) -> list[dict[str, int]]:
        """The shapes at which ``target`` would take at least ``share`` of the nodes
        (predicted)."""
        return [r.dims for r in self.rows if r.predicted.get(target, 0.0) >= share]

    def __repr__(self) -> str:
        ok = [r for r in self.rows if not r.error]
        span = (
            f"{min(r.p50_ms for r in ok):.3g}..{max(r.p50_ms for r in ok):.3g} ms"
            if ok
            else "no shape ran"
        )
        return f"<SweepResult {self.model}: {len(self.rows)} shapes, p50 {span}>"


def _points(dims: Mapping[str, Sequence[int]]) -> list[dict[str, int]]:
    if not dims:
        raise SweepError(
            "dims is empty: give each dim to sweep a list, e.g. dims={'batch': [1, 2, 4, 8]}"
        )
    lists: dict[str, list[int]] = {}
    for name, values in dims.items():
        vals = [values] if isinstance(values, int) else list(values)
        if not vals or not all(isinstance(v, int | np.integer) and int(v) >= 0 for v in vals):
            raise SweepError(  # 0 is a size: a decoder's past of 0 is its prefill
                f"dims[{name!r}] must be a list of non-negative integers, not {values!r}"
            )
        lists[name] = list(dict.fromkeys(int(v) for v in vals))
    count = math.prod(len(v) for v in lists.values())
    if count > MAX_POINTS:
        raise SweepError(
            f"{count} shapes (the product of the lists) is more than a sweep "
            f"measures ({MAX_POINTS}): sweep fewer values, or one dim at a "
            "time"
        )
    return [dict(zip(lists, combo, strict=True)) for combo in itertools.product(*lists.values())]


def _latency(latencies_ns: Sequence[int]) -> tuple[float, float, float]:
    """Median and its 95 % interval from order statistics (NaN bounds with too few runs)."""
    mid, low, high, _ = median_with_interval(np.asarray(latencies_ns, dtype=np.float64) / 1e6)
    return mid, low, high


def _measure(run: Run, point: dict[str, int], *, runs: int, targets: Sequence[str]) -> SweepRow:
    """One shape: ``run`` is the sweep's Run at that point's dims."""
    b = benchmark_run(run.with_(runs=runs, warmup=3))
    p50, low, high = _latency(b.latencies_ns)
    pl = placement_run(run.with_(runs=3, warmup=1))
    per_ep: dict[str, int] = {}
    for r in pl.node_rows:
        if r.partition >= 0:
            per_ep[r.provider] = per_ep.get(r.provider, 0) + 1
    wanted = pl.wanted
    fallbacks = sum(n for ep, n in per_ep.items() if ep != wanted) if wanted else 0
    peak = -1
    if pl.profile is not None:
        mem = pl.profile.memory()
        if len(mem) and int(mem["peak_bytes"].iloc[-1]) >= 0:
            peak = int(mem["peak_bytes"].iloc[-1])
    predicted: dict[str, float] = {}
    if targets:
        w = whatif_run(unconfigured(run).with_(progress=False), targets, fixed=True, dims=point)
        for t in w.targets:
            try:
                got = w[t.target]
            except OrtlabError:
                predicted[t.target] = math.nan
                continue
            rows = [r for r in got.node_rows if r.partition >= 0]
            on = sum(1 for r in rows if r.provider == t.ep)
            predicted[t.target] = on / len(rows) if rows else math.nan
    return SweepRow(
        dims=point,
        p50_ms=p50,
        low_ms=low,
        high_ms=high,
        runs=len(b.latencies_ns),
        nodes_per_ep=per_ep,
        fallbacks=fallbacks,
        memcpy=len(pl.memcpy),
        peak_bytes=peak,
        predicted=predicted,
    )


def sweep(
    model: ModelLike,
    config: ConfigLike | None = None,
    *,
    dims: Mapping[str, Sequence[int]],
    targets: Sequence[str] = (),
    runs: int = 30,
    progress: bool | Callable[[int, int], None] = True,
    timeout: float | None = None,
) -> SweepResult:
    """Latency (median with its interval), placement (nodes per EP, fallbacks, Memcpy) and
    the allocator's peak memory at every combination of ``dims`` values, e.g.
    ``dims={"batch": [1, 2, 4, 8]}``; with ``targets`` (qnn, nnapi, coreml…), the share of
    nodes each accelerator would take at each shape (predicted, as ``ortlab.whatif``).

    A shape the model refuses is a row with its error; the others are still measured. It
    takes the verbs' order (model, config, then keywords); it has no ``feeds=``: feeds fix
    every shape, and a sweep changes them.
    """
    points = _points(dims)
    m = load(model)
    if isinstance(targets, str):
        targets = [t for t in targets.split(",") if t.strip()]
    rows: list[SweepRow] = []
    bar = None
    if progress is True:  # a bar per shape, as every verb shows one (progress=False: none)
        from tqdm.auto import tqdm

        bar = tqdm(total=len(points), desc=f"sweep {m.name}", unit="shape", leave=False)
    report = progress if callable(progress) else None
    first: Run | None = None  # the edge once; every other point derives from it
    for i, point in enumerate(points):
        try:
            if first is None:
                run = first = edge(m, config, None, dims=point, progress=False, timeout=timeout)
            else:
                run = first.derive(dims=point)
            rows.append(_measure(run, point, runs=runs, targets=targets))
        except OrtlabError as err:  # this shape: say why, measure the others
            rows.append(
                SweepRow(
                    dims=point,
                    p50_ms=math.nan,
                    low_ms=math.nan,
                    high_ms=math.nan,
                    runs=0,
                    error=str(err)[:400],
                )
            )
        if report is not None:
            report(i + 1, len(points))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    notes = [
        f"Latency: the median of {runs} runs per shape (profiling off) with its 95 % interval "
        "from order statistics of those runs; shapes are measured one after another, not "
        "interleaved, so compare neighbours with that in mind.",
        "Peak memory: the EP allocator's peak over a profiled run, as ORT recorded it.",
    ]
    if targets:
        notes.append("Shares per target are predicted (ortlab.whatif), not measured.")
    if all(r.error for r in rows):
        notes.append("No shape ran: see each row's error.")
    cfg = as_config(config)
    swept = {k: sorted({p[k] for p in points}) for k in points[0]}
    return SweepResult(
        model=m.name,
        config=cfg,
        swept=swept,
        rows=rows,
        targets=list(targets),
        notes=notes,
    )
