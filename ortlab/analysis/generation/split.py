"""A generation's profiled time split by phase and layer (``GenerationResult.by_phase``,
``by_layer``): each node's median over several profiled generations' prefills and over their
decode steps, with profiled steps far from their unprofiled time left out, so one stalled step
is never shown as the model's physics (issue 46)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ortlab.core.result import Table
from ortlab.core.runtime import PROFILER_US_PER_NODE
from ortlab.engine.trace import ProfileData, per_run_grid

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Timeline",
    "by_layer",
    "by_phase",
    "outliers",
    "phase_run_us",
    "phase_runs",
    "profiler_weight",
    "run_step",
    "shares_said",
]


@dataclass(frozen=True)
class Timeline:
    """What the split reads of a generation (``GenerationResult.timeline``): each step's
    times, the profiled generations' traces and how they map to steps, and each node's
    layer."""

    steps_ms: list[list[float]]
    model_ms: list[list[float]]
    profile: ProfileData | None
    encoder_profile: ProfileData | None
    encoder_layers: dict[str, int | None]
    profiled_steps: int
    profiled_reps: int
    first_steps: int
    layer_sources: dict[str, str]
    layer: Callable[[str], int | None]
    """A profiled node's transformer layer (None: outside the layers)."""


COLUMNS = ["phase", "node", "op_type", "layer", "layer_source", "us_per_step", "share", "calls"]


def by_phase(g: Timeline) -> Table:
    """One row per phase and profiled node (``GenerationResult.by_phase``)."""
    import pandas as pd

    d = g.profile
    if d is None or not d.node:
        return pd.DataFrame(columns=COLUMNS)
    grid = per_run_grid(d)  # nodes x profiled steps, each node's own time
    layer = pd.array([g.layer(n) for n in d.node], dtype="Int64")
    source = [g.layer_sources.get(n, "name") for n in d.node]
    frames = [_encoder_rows(g)] if g.encoder_profile is not None else []
    for phase, steps in phase_runs(g, grid).items():
        if not steps:
            continue
        us = np.median(grid[:, steps], axis=1)
        calls = (grid[:, steps] > 0).sum(axis=1)
        total = float(us.sum()) or 1.0
        frames.append(
            pd.DataFrame(
                {
                    "phase": phase,
                    "node": d.node,
                    "op_type": d.op_type,
                    "layer": layer,
                    "layer_source": source,
                    "us_per_step": us,
                    "share": us / total,
                    "calls": calls,
                }
            ).sort_values("us_per_step", ascending=False)
        )
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def _encoder_rows(g: Timeline) -> pd.DataFrame:
    """An encoder-decoder's encoder: each node's median over the profiled generations' encoder
    runs (one per generation), phase 'encoder'; layers from the encoder's graph."""
    import pandas as pd

    d = g.encoder_profile
    assert d is not None
    grid = per_run_grid(d)
    us = np.median(grid, axis=1) if grid.size else np.zeros(len(d.node))
    total = float(us.sum()) or 1.0
    return pd.DataFrame(
        {
            "phase": "encoder",
            "node": d.node,
            "op_type": d.op_type,
            "layer": pd.array([g.encoder_layers.get(n) for n in d.node], dtype="Int64"),
            "layer_source": "encoder: graph, else name",
            "us_per_step": us,
            "share": us / total,
            "calls": (grid > 0).sum(axis=1) if grid.size else 0,
        }
    ).sort_values("us_per_step", ascending=False)


def by_layer(g: Timeline) -> Table:
    """:func:`by_phase` summed per layer (-1: outside the layers)."""
    t = by_phase(g)
    if not len(t):
        return t.reindex(columns=["phase", "layer", "us_per_step", "share", "nodes"])
    t = t.assign(layer=t["layer"].fillna(-1).astype(int))
    out = t.groupby(["phase", "layer"], sort=False).agg(
        us_per_step=("us_per_step", "sum"), share=("share", "sum"), nodes=("node", "count")
    )
    out = out.reset_index()
    first = out["phase"].map({"encoder": -1, "prefill": 0, "decode": 1})
    return out.assign(_o=first).sort_values(["_o", "layer"], ignore_index=True).drop(columns="_o")


def profiler_weight(g: Timeline) -> dict[str, tuple[int, float, float]]:
    """Per phase (prefill, decode): the nodes a profiled step executes, their profiled time per
    step (µs, as :func:`by_phase` sums it) and the same step's whole ``sess.run`` unprofiled
    (µs, the median over the timed generations): what the profiler added is the difference,
    measured here rather than assumed."""
    t = by_phase(g)
    ms = np.asarray(g.model_ms or g.steps_ms, dtype=np.float64)
    if ms.ndim != 2 or not ms.size:
        return {}
    unprofiled = {"prefill": ms[:, 0], "decode": ms[:, 1:]}
    out = {}
    for phase, times in unprofiled.items():
        rows = t[(t["phase"] == phase) & (t["us_per_step"] > 0)]
        if not len(rows) or not times.size:
            continue
        out[phase] = (len(rows), float(rows["us_per_step"].sum()), float(np.median(times)) * 1e3)
    return out


LEANS = 0.25
"""The part of a phase's profiled node time the profiler may add before its shares are said to
lean toward the parts with many small nodes (each node pays the profiler about the same)."""


def shares_said(g: Timeline) -> str:
    """Whether by_phase()/by_layer()'s shares hold: where the profiler added a large part of a
    phase's profiled node time (:func:`profiler_weight`), each node paid about the same, so
    the shares lean toward the parts with many small nodes (said with the times)."""
    w = profiler_weight(g)
    part = {p: max(0.0, 1.0 - x[2] / x[1]) for p, x in w.items()}
    leaning = [p for p, x in part.items() if x >= LEANS]
    if not leaning:
        most = max(part.values(), default=0.0)
        return (
            "Shares hold: the profiler added at most "
            f"{most:.0%} of a phase's profiled node time here."
        )
    said = "; ".join(
        f"{p}'s profiled nodes take {w[p][1]:,.0f} µs a step against {w[p][2]:,.0f} µs for its "
        f"whole run unprofiled ({w[p][0]} nodes: about {part[p]:.0%} is the profiler's)"
        for p in leaning
    )
    return (
        f"Shares lean toward the parts with many small nodes: {said}. Each node pays the "
        "profiler about the same, so read the shares of layers and ops made of many small "
        "nodes as upper bounds."
    )


def phase_run_us(g: Timeline) -> dict[str, float]:
    """Each phase's profiled run time per step: the median over its kept steps (µs)."""
    d = g.profile
    if d is None or not d.run_us:
        return {}
    return {
        phase: float(np.median([d.run_us[k] for k in runs]))
        for phase, runs in phase_runs(g).items()
        if runs
    }


def outliers(
    g: Timeline, grid: np.ndarray | None = None
) -> list[tuple[str, int, int, float, float]]:
    """Profiled steps far from the same step unprofiled: (phase, profiled generation, step,
    profiled µs, unprofiled µs) for each whose run exceeds the unprofiled median at that step
    by more than twice the profiler's overhead (measured here: the median excess over all
    profiled steps, at least :data:`PROFILER_US_PER_NODE` per executed node) plus the
    unprofiled time itself and 50 µs. ``grid``: the trace's (nodes x runs) own times, where
    the caller has them."""
    d = g.profile
    if d is None or not d.run_us or not g.profiled_steps:
        return []
    ms = np.asarray(g.model_ms or g.steps_ms, dtype=np.float64)
    unprofiled = np.median(ms, axis=0) * 1e3  # µs per step index
    executed = ((per_run_grid(d) if grid is None else grid) > 0).sum(axis=0)
    where = [run_step(g, k) for k in range(len(d.run_us))]
    excess = [
        us - unprofiled[j] for us, (_, j) in zip(d.run_us, where, strict=True) if j < len(ms[0])
    ]
    typical = float(np.median(excess)) if excess else 0.0
    out = []
    for k, us in enumerate(d.run_us):
        rep, step = where[k]
        if step >= len(unprofiled):
            continue
        overhead = max(typical, PROFILER_US_PER_NODE * float(executed[k]))
        if us - unprofiled[step] > 2 * overhead + unprofiled[step] + 50.0:
            phase = "prefill" if step == 0 else "decode"
            out.append((phase, rep, step, float(us), float(unprofiled[step])))
    return out


def run_step(g: Timeline, k: int) -> tuple[int, int]:
    """Run ``k`` of the profiled trace as (profiled generation, step): the generations'
    ``profiled_steps`` each, then ``first_steps`` generations of their prefill alone."""
    window = g.profiled_steps or (len(g.profile.run_us) if g.profile is not None else 1)
    whole = g.profiled_reps * window if g.first_steps else k + 1
    if k < whole:
        return divmod(k, window)
    return g.profiled_reps + (k - whole), 0


def phase_runs(g: Timeline, grid: np.ndarray | None = None) -> dict[str, list[int]]:
    """The profiled runs each phase's split reads: the prefill's and the decode steps' of every
    profiled generation, outliers left out unless a phase has nothing else."""
    d = g.profile
    if d is None or not d.run_us:
        return {}
    where = [run_step(g, k) for k in range(len(d.run_us))]
    far = {where.index((rep, step)) for _, rep, step, _, _ in outliers(g, grid)}
    runs: dict[str, list[int]] = {"prefill": [], "decode": []}
    for k, (_, step) in enumerate(where):
        runs["prefill" if step == 0 else "decode"].append(k)
    return {phase: [k for k in ks if k not in far] or ks for phase, ks in runs.items()}
