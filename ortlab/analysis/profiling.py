"""ORT's profiler, run in the worker, and the :class:`ProfileResult` tables over its trace
(parsed by :mod:`ortlab.engine.trace`).

Times measured with profiling on include ORT's per-node profiling overhead
(``core.runtime.PROFILER_US_PER_NODE``): use
them for *shares* and per-node comparisons; take latency from :func:`ortlab.benchmark`.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

import numpy as np

from ortlab.analysis.perfetto import write_perfetto
from ortlab.core.config import SessionConfig
from ortlab.core.machine import BUSY_CORES, load_sentence
from ortlab.core.model import ModelLike
from ortlab.core.result import Result, Table
from ortlab.core.run import Run
from ortlab.core.runtime import PROFILER_OVERHEAD
from ortlab.core.units import fmt_ms
from ortlab.engine import tasks
from ortlab.engine.calls import Reach, edge, run_model_task
from ortlab.engine.session import SessionReport
from ortlab.engine.trace import (
    ProfileData,
    nested_events,
    node_us_per_run,
    parse_profile,
    parse_profile_file,
    per_run_grid,
    self_durations,
    types_text,
)

if TYPE_CHECKING:
    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike

__all__ = [
    "ProfileData",
    "ProfileResult",
    "nested_events",
    "parse_profile",
    "parse_profile_file",
    "profile",
    "profile_result",
    "self_durations",
]


MEMORY_COLUMNS = (
    "output_bytes",
    "activation_bytes",
    "parameter_bytes",
    "in_use_bytes",
    "peak_bytes",
    "arena_bytes",
)


def _sizes(values: list[int], n: int) -> np.ndarray:
    """A ProfileData size column, or -1 throughout for a trace parsed before it existed."""
    return np.asarray(values if len(values) == n else [-1] * n, dtype=np.int64)


def _group_medians(ids: np.ndarray, values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Median of ``values`` per group id (groups without values get NaN), vectorised."""
    order = np.lexsort((values, ids))
    ordered = values[order]
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    lo = starts + np.maximum(counts - 1, 0) // 2
    hi = starts + counts // 2
    safe = counts > 0
    out = np.full(len(counts), np.nan)
    if len(ordered):
        lo_v = ordered[np.minimum(lo, len(ordered) - 1)]
        hi_v = ordered[np.minimum(hi, len(ordered) - 1)]
        out[safe] = (lo_v / 2 + hi_v / 2)[safe]  # halves first: no overflow near float max
    return out


@dataclass(frozen=True)
class ProfileResult(Result):
    """Per-node time from ORT's profiler, with per-op-type and per-EP views.

    Tables (``by_node``, ``by_op_type``, ``by_provider``) are keyed by ORT's node names in the
    *optimized* graph, use ORT's words (op_type, provider) and report µs.


    ``plot(kind)``: 'op_type' (bar, the default), 'provider' (sunburst EP → op type → node),
    'top' (slowest nodes), 'timeline' (one run, ``run=``).
    """

    model: str
    config: SessionConfig
    data: ProfileData
    report: SessionReport | None = None
    notes: list[str] = field(default_factory=list)
    feeds: str = ""
    """The inputs the figures come from: names, dtypes, shapes (and how dims were chosen)."""
    synthetic: bool | None = None
    """True when ortlab synthesized those inputs (seeded random values); None if unknown."""

    # ---------------------------------------------------------------- tables

    @property
    def runs(self) -> int:
        return len(self.data.run_us)

    @property
    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.data.events

    @property
    def _self_us(self) -> np.ndarray:
        """Per event, its own time (control-flow nodes without their bodies)."""
        return self_durations(self.data)

    def per_run(self) -> np.ndarray:
        """Each node's own time in each measured run, µs: a (nodes x runs) array in the order
        of ``data.node`` (an If/Loop/Scan without its body, whose nodes have rows of their
        own). The one grid the run-level statistics read: node times, ortlab.diff."""
        return per_run_grid(self.data)

    @functools.cached_property
    def _us_per_run(self) -> np.ndarray:
        """Per node, its time: the median run's own time (:func:`node_us_per_run`)."""
        return node_us_per_run(self.data)

    @functools.cached_property
    def _median_run_us(self) -> float:
        """The median run's node time (the sum of node times): the denominator of shares."""
        return float(self._us_per_run.sum()) or 1.0

    @property
    def median_run_ms(self) -> float:
        """The median measured run's wall time (ORT's ``model_run`` event), ms, profiler on."""
        return float(np.median(self.data.run_us)) / 1e3 if self.data.run_us else math.nan

    @property
    def node_coverage(self) -> float:
        """The node times' sum (the median run's node time) over the median run's wall time:
        what the node table accounts for. Near 1 on an idle machine; far under it the rest is
        ORT between nodes and, on a busy machine, threads waiting for a core (shares then
        weigh the nodes that waited)."""
        wall = self.median_run_ms * 1e3
        return float(self._us_per_run.sum()) / wall if wall > 0 else math.nan

    @property
    def busy(self) -> bool:
        """Other processes used more than ``BUSY_CORES`` while the profiled runs ran."""
        load = self.data.other_cores
        return load is not None and load > BUSY_CORES

    @property
    def conditions(self) -> str:
        """What the profile's figures are, in one sentence that every view quotes: the median
        run with the profiler on, how much of it the node table covers, and the machine's load
        while it ran (the warning when it was busy)."""
        text = (
            f"median of {self.runs} run(s) with ORT's profiler on: {fmt_ms(self.median_run_ms)} "
            f"(a benchmark, profiler off, gives latency); node times add up to "
            f"{self.node_coverage:.0%} of it"
        )
        text += "; " + load_sentence(self.data.other_cores)
        if self.busy:
            text += "; nodes that waited for a core look slower and their shares inflated"
        return text

    def by_node(self) -> Table:
        """One row per node: node, op_type, provider, us_per_run (THE node time: the median
        over runs of its own time in a run, profiling on), share (of the median run: each
        node's us_per_run over their sum, so shares add up to 1), calls, median_us (per
        call), mean_us, total_us (over all runs, as ORT measured it: an If/Loop/Scan's
        includes its body), self_us (total without the body, whose nodes are listed too),
        input_shapes,
        output_shapes, and memory as ORT recorded it (-1 where it did not): output_bytes,
        activation_bytes, parameter_bytes (weights), in_use_bytes / peak_bytes / arena_bytes
        (the allocator when the node last ran: allocated, peak so far, held by the arena);
        slowest first (by us_per_run: one stalled run does not reorder the nodes)."""
        import pandas as pd

        d = self.data
        ids, _, _, dur = self._arrays
        n = len(d.node)
        calls = np.bincount(ids, minlength=n)
        total = np.bincount(ids, weights=dur, minlength=n)
        own = np.bincount(ids, weights=self._self_us, minlength=n)
        median = _group_medians(ids, dur, calls)
        present = calls > 0
        table = pd.DataFrame(
            {
                "node": d.node,
                "op_type": d.op_type,
                "provider": d.provider,
                "us_per_run": self._us_per_run,
                "share": self._us_per_run / self._median_run_us,
                "calls": calls,
                "median_us": median,
                "mean_us": np.divide(total, calls, out=np.zeros(n), where=present),
                "total_us": total,
                "self_us": own,
                "input_shapes": [types_text(t) for t in d.input_types],
                "output_shapes": [types_text(t) for t in d.output_types],
                **{col: _sizes(getattr(d, col), n) for col in MEMORY_COLUMNS},
            }
        )[present]
        return table.sort_values(
            ["us_per_run", "self_us"], ascending=False, kind="stable"
        ).reset_index(drop=True)

    def memory(self) -> Table:
        """Memory over one run, in execution order (the last measured run): node, op_type,
        provider, start_us, in_use_bytes, peak_bytes, arena_bytes, output_bytes. ``peak_bytes``
        of the last row is the run's peak as ORT's allocator saw it."""
        import pandas as pd

        d = self.data
        if not d.ev_run:
            return pd.DataFrame(
                columns=[
                    "node",
                    "op_type",
                    "provider",
                    "start_us",
                    *MEMORY_COLUMNS[3:],
                    "output_bytes",
                ]
            )
        last = max(d.ev_run)
        order = sorted(
            (s, k) for s, k, r in zip(d.ev_start_us, d.ev_node, d.ev_run, strict=True) if r == last
        )
        n = len(d.node)
        cols = {c: _sizes(getattr(d, c), n) for c in MEMORY_COLUMNS}
        seen: set[int] = set()
        rows = []
        for start, k in order:
            if k in seen:  # a node inside a Loop body runs several times: once is enough
                continue
            seen.add(k)
            rows.append(
                {
                    "node": d.node[k],
                    "op_type": d.op_type[k],
                    "provider": d.provider[k],
                    "start_us": start,
                    "in_use_bytes": cols["in_use_bytes"][k],
                    "peak_bytes": cols["peak_bytes"][k],
                    "arena_bytes": cols["arena_bytes"][k],
                    "output_bytes": cols["output_bytes"][k],
                }
            )
        return pd.DataFrame(rows)

    def _grouped(self, keys: list[str]) -> Table:
        """Per group of nodes: nodes, calls, us_per_run (the sum of its nodes' times, so a
        group's share is the sum of its nodes' shares), share, total_us (all runs) and
        median_per_run_us (the median over runs of the group's per-run sum); slowest first by
        us_per_run. Self times: an If/Loop/Scan counts its own time, its body's nodes their
        own."""
        import pandas as pd

        d = self.data
        ids, runs, _, _ = self._arrays
        dur = self._self_us
        labels = (
            list(zip(d.op_type, d.provider, strict=True)) if len(keys) == 2 else list(d.provider)
        )
        group_index: dict[Any, int] = {}
        node_group = np.array(  # int64 even when empty: a trace without node events
            [group_index.setdefault(x, len(group_index)) for x in labels], dtype=np.int64
        )
        groups = len(group_index)
        ev_group = node_group[ids] if len(ids) else np.zeros(0, dtype=np.int64)
        n_runs = max(int(runs.max()) + 1 if len(runs) else 1, 1)
        per_run = np.bincount(ev_group * n_runs + runs, weights=dur, minlength=groups * n_runs)
        calls = np.bincount(ev_group, minlength=groups)
        total = np.bincount(ev_group, weights=dur, minlength=groups)
        ran = np.bincount(ids, minlength=len(d.node)) > 0
        nodes = np.bincount(node_group[ran], minlength=groups)
        time = np.bincount(node_group, weights=self._us_per_run, minlength=groups)
        keys_cols = (
            [[k[0] for k in group_index], [k[1] for k in group_index]]
            if len(keys) == 2
            else [list(group_index)]
        )
        out = pd.DataFrame(dict(zip(keys, keys_cols, strict=True)))
        out["nodes"] = nodes
        out["calls"] = calls
        out["us_per_run"] = time
        out["share"] = time / self._median_run_us
        out["total_us"] = total
        out["median_per_run_us"] = np.median(per_run.reshape(groups, n_runs), axis=1)
        out = out[out["calls"] > 0]
        return out.sort_values(
            ["us_per_run", "total_us"], ascending=False, kind="stable"
        ).reset_index(drop=True)

    def by_op_type(self) -> Table:
        """One row per (op_type, provider): nodes, calls, us_per_run, share, total_us,
        median_per_run_us (self times: nothing counted twice, shares add up to 1)."""
        return self._grouped(["op_type", "provider"])

    def by_provider(self) -> Table:
        """One row per execution provider: nodes, calls, us_per_run, share, total_us,
        median_per_run_us."""
        return self._grouped(["provider"])

    def top_nodes(self, n: int = 10) -> Table:
        """The ``n`` slowest nodes by their median run (rows of :meth:`by_node`)."""
        return self.by_node().head(n)

    def timeline(self, run: int = 0) -> Table:
        """Node events of one measured run: node, op_type, provider, start_us, dur_us."""
        import pandas as pd

        if not 0 <= run < max(self.runs, 1):
            raise IndexError(f"run {run} out of range: this profile has {self.runs} runs.")
        ids, runs, start, dur = self._arrays
        sel = np.nonzero(runs == run)[0]
        sel = sel[np.argsort(start[sel], kind="stable")]
        d = self.data
        return pd.DataFrame(
            {
                "node": [d.node[i] for i in ids[sel]],
                "op_type": [d.op_type[i] for i in ids[sel]],
                "provider": [d.provider[i] for i in ids[sel]],
                "start_us": start[sel],
                "dur_us": dur[sel],
            }
        )

    def to_perfetto(self, path: str | os.PathLike[str], *, model: ModelLike | None = None) -> Path:
        """Write this profile as a trace that Perfetto (ui.perfetto.dev: Open trace file) and
        chrome://tracing open; returns its absolute path. One process per EP and a thread per
        OS thread ORT ran nodes on; a slice per node event, named after the original node where
        ortlab knows it (``args.kernel`` is ORT's name, ``args.name_from`` says how); memory
        counters per EP over the last run; a slice per measured run (the ``runs`` process);
        flow arrows along tensors that cross EPs.

        ``model``: the model, whose node names are kept where ORT kept them (and whose file
        is never overwritten); without it, names are original only at level 'disabled'. For
        fused kernels named after the original node and the flows, write a placement's profile
        instead: ``ortlab.placement(...).to_perfetto(path)``. Written atomically; refuses
        ``.onnx`` paths."""
        return write_perfetto(
            self.data, path, model_name=self.model, config=self.config, model=model
        )

    def to_pandas(self) -> Table:
        """The per-node table (:meth:`by_node`): one row per node of the optimized graph."""
        return self.by_node()

    # ---------------------------------------------------------------- display

    def __repr__(self) -> str:
        d = self.data
        med = float(np.median(d.run_us)) if d.run_us else float("nan")
        return (
            f"<ProfileResult {self.model!r}: {len(d.node)} nodes, {self.runs} runs, "
            f"median run {fmt_ms(med / 1e3)} with profiling on, providers "
            f"{sorted(set(d.provider))}>"
        )


def profile(
    model: ModelLike,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    runs: int = 20,
    warmup: int = 3,
    **reach: Unpack[Reach],
) -> ProfileResult:
    """Profile ``runs`` runs of ``model`` under ``config`` with ORT's profiler, in the worker.

    The trace file goes to a private folder in ortlab's cache and is deleted after parsing;
    nothing is written to the working directory.

    ``dims``, ``progress`` and ``timeout`` as every verb takes them (:class:`Reach`).
    """
    run = edge(model, config, feeds, runs=runs, warmup=warmup, **reach)
    return profile_run(run)


def profile_run(run: Run) -> ProfileResult:
    """:func:`profile`'s body, for a :class:`Run` resolved already."""
    out = run_model_task(tasks.profile, run, runs=run.runs, warmup=run.warmup)
    return profile_result(run, out.data, out.report)


def profile_result(run: Run, data: ProfileData, report: SessionReport | None) -> ProfileResult:
    """THE way a ProfileResult is made from a worker's profiled runs (``profile``, the
    placement join's and the roofline's profiles): the same conditions and notes whichever
    verb profiled."""
    notes = [
        f"Times are measured with ORT's profiler on ({PROFILER_OVERHEAD}): use them "
        "for shares and comparisons between nodes; ortlab.benchmark gives latency.",
        *run.inputs.notes,
    ]
    return ProfileResult(
        model=run.model.name,
        config=run.config,
        data=data,
        report=report,
        notes=notes,
        feeds=run.inputs.describe(),
        synthetic=run.synthetic,
    )
