"""The placement join as a result: one row per original node (:class:`NodeRow`), per final-graph
node (:class:`OptimizedRow`), per EP partition and per EP boundary, gathered in
:class:`PlacementResult` with its tables. :mod:`ortlab.analysis.placement.measure` computes it.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ortlab.analysis.graph.mapping import KERNELS_FOR
from ortlab.analysis.perfetto import TraceJoin, write_perfetto
from ortlab.analysis.placement.reasons import group_reasons
from ortlab.analysis.profiling import ProfileResult
from ortlab.core.config import SessionConfig
from ortlab.core.eps import MEMCPY_OPS
from ortlab.core.errors import OptionError
from ortlab.core.result import Result, Table, table
from ortlab.engine.session import SessionReport

if TYPE_CHECKING:
    from ortlab.core.model import ModelLike

__all__ = ["BoundaryRow", "NodeRow", "OptimizedRow", "PartitionRow", "PlacementResult"]


@dataclass(frozen=True)
class NodeRow:
    """One original node. Time is the measured time of the final node(s) it became part of,
    split evenly across the original nodes of that group (``time_source`` says so)."""

    node: str
    op_type: str
    status: str
    """kept / rewritten / fused / folded / eliminated (see ortlab.graphmap), or compiled
    (inside a compiled EP subgraph such as OpenVINO's or TensorRT's)."""
    optimized: tuple[str, ...]
    """Final-graph nodes it became part of (a compiled EP subgraph counts as one). Tuples
    here and in ``fused_from``: the garbage collector stops tracking a tuple of strings, so
    the rows a Lab keeps for its last runs are not walked by every full collection."""
    provider: str
    partition: int
    """Partition id (see ``partitions``); -1 when the node was folded or eliminated."""
    us_per_run: float
    group_us_per_run: float
    """Time of the whole final node(s) it belongs to."""
    share: float
    time_source: str
    reason: str = ""
    """Why the node is not on the EP the session wanted first (ORT's or the EP's words, see
    :mod:`ortlab.analysis.placement.reasons`); '' when it is, when only the CPU was asked for,
    and for nodes ORT removed before partitioning (``status`` says so)."""
    output_bytes: int = -1
    """Bytes of the outputs of the final node(s) it became part of, as ORT's profiler
    recorded them (-1: not recorded, e.g. folded away or a compiled subgraph's member)."""
    parameter_bytes: int = -1
    """Weight bytes those final node(s) held when they ran (0 for weights a kernel prepacked)."""


@dataclass(frozen=True)
class OptimizedRow:
    node: str
    op_type: str
    domain: str
    provider: str
    partition: int
    fused_from: tuple[str, ...]
    us_per_run: float
    share: float
    compiled: bool
    executed: bool
    reason: str = ""
    """Why it is where it is, for nodes ORT inserted (Memcpy) or that left the wanted EP."""


@dataclass(frozen=True)
class PartitionRow:
    partition: int
    provider: str
    compiled: bool
    optimized_nodes: list[str]
    original_nodes: list[str]
    inputs: list[str]
    outputs: list[str]
    us_per_run: float


@dataclass(frozen=True)
class BoundaryRow:
    tensor: str
    producer: str
    producer_provider: str
    consumer: str
    consumer_provider: str
    bytes: int
    """From the run-time shape ORT recorded for the producer's output; -1 if unknown."""


@dataclass(frozen=True)
class PlacementResult(Result):
    model: str
    config: SessionConfig
    report: SessionReport
    runs: int
    node_rows: list[NodeRow]
    optimized_rows: list[OptimizedRow]
    partition_rows: list[PartitionRow]
    boundary_rows: list[BoundaryRow]
    assignment: list[tuple[str, tuple[str, ...]]]
    """Source 1, raw: (EP, node names at partitioning time) per assigned subgraph."""
    final_source: str
    notes: list[str] = field(default_factory=list)
    profile: ProfileResult | None = None
    """The profile this join was timed with (same session, same runs): per-op charts need no
    second profiled session."""
    ort_ms: float | None = None
    """Wall time inside ORT's own calls: the session build, every run (warm-up included) and
    ``end_profiling``. The rest of the call (the join, parsing, probes…) is ortlab's. None
    when not measured (a join built from recorded sources)."""
    feeds: str = ""
    """The inputs the figures come from: names, dtypes, shapes (and how dims were chosen)."""
    synthetic: bool | None = None
    """True when ortlab synthesized those inputs (seeded random values); None if unknown."""
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    """Each input's shape in the runs measured (the graph view infers tensor shapes at them)."""

    # ------------------------------------------------------------------ tables

    @table
    def nodes(self) -> Table:
        """Per ORIGINAL node: node, op_type, status, optimized, provider, partition,
        us_per_run, group_us_per_run, share, time_source, reason, output_bytes,
        parameter_bytes."""
        import pandas as pd

        return pd.DataFrame([_listed(r) for r in self.node_rows], columns=_cols(NodeRow))

    @table
    def optimized(self) -> Table:
        """Per final-graph node: node, op_type, domain, provider, partition, fused_from,
        us_per_run, share, compiled, executed, reason."""
        import pandas as pd

        return pd.DataFrame([_listed(r) for r in self.optimized_rows], columns=_cols(OptimizedRow))

    @table
    def partitions(self) -> Table:
        """One row per EP subgraph: partition, provider, compiled, optimized_nodes,
        original_nodes (names in the original graph), inputs, outputs, us_per_run."""
        import pandas as pd

        return pd.DataFrame([r.__dict__ for r in self.partition_rows], columns=_cols(PartitionRow))

    @table
    def boundaries(self) -> Table:
        """Tensors crossing from one EP to another: tensor, producer, producer_provider,
        consumer, consumer_provider, bytes."""
        import pandas as pd

        return pd.DataFrame([r.__dict__ for r in self.boundary_rows], columns=_cols(BoundaryRow))

    @table
    def memcpy(self) -> Table:
        t = self.optimized
        return t[t["op_type"].isin(MEMCPY_OPS)]

    @property
    def wanted(self) -> str:
        """The EP this session wanted first (the first requested provider that is not the
        CPU); '' when only the CPU was asked for. ``reason`` says why a node is not on it."""
        return self.report.wanted

    def reasons(self) -> Table:
        """Why nodes are not on :attr:`wanted`, grouped: reason (normalised), nodes, examples,
        fix, raw (the most common sentence, as ORT or the EP said it)."""
        import pandas as pd

        rows = [(r.node, r.reason, "") for r in self.node_rows]
        groups = group_reasons(rows, self.wanted or "CPUExecutionProvider", [], fixed=False)
        return pd.DataFrame(groups, columns=["reason", "nodes", "examples", "fix", "raw"])

    def summary(self) -> Table:
        """Per provider: original nodes, share of nodes, partitions, µs per run, share of time,
        output_bytes (what its kernels write per run, as ORT's profile recorded them: a
        fused kernel once, not once per original node)."""
        import pandas as pd

        rows = []
        total_nodes = sum(1 for r in self.node_rows if r.partition >= 0) or 1
        total_time = sum(r.us_per_run for r in self.optimized_rows) or 1.0
        written: dict[str, int] = {}
        if self.profile is not None:
            kernels = self.profile.by_node()
            kernels = kernels[kernels["output_bytes"] > 0]
            written = {
                str(k): int(v) for k, v in kernels.groupby("provider")["output_bytes"].sum().items()
            }
        for prov in dict.fromkeys(r.provider for r in self.partition_rows):
            nodes = sum(1 for r in self.node_rows if r.provider == prov and r.partition >= 0)
            time = sum(r.us_per_run for r in self.optimized_rows if r.provider == prov)
            rows.append(
                {
                    "provider": prov,
                    "nodes": nodes,
                    "node_share": nodes / total_nodes,
                    "partitions": sum(1 for p in self.partition_rows if p.provider == prov),
                    "us_per_run": time,
                    "time_share": time / total_time,
                    "output_bytes": written.get(prov, 0),
                }
            )
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        provs = ", ".join(
            f"{r.provider.removesuffix('ExecutionProvider')} {r.nodes} nodes"
            for r in self.summary().itertuples()
        )
        return (
            f"<PlacementResult {self.model!r}: {provs}; {len(self.partition_rows)} partitions, "
            f"{len(self.boundary_rows)} boundary tensors, {len(self.memcpy)} Memcpy; "
            f"{self.report.summary()}>"
        )

    def trace_join(self) -> TraceJoin:
        """What this join tells a Perfetto trace of its profile: each kernel's original nodes
        and the one it is named after, and the tensors crossing EPs."""
        return TraceJoin(
            fused={r.node: tuple(r.fused_from) for r in self.optimized_rows},
            primary=_primaries(self),
            edges=[(b.producer, b.consumer, b.tensor) for b in self.boundary_rows],
        )

    def to_perfetto(self, path: str | os.PathLike[str], *, model: ModelLike | None = None) -> Path:
        """Write this placement's profile as a Perfetto trace (:meth:`ProfileResult.to_perfetto`)
        with what the join knows: fused kernels named after the original node, and flow
        arrows along the tensors that cross EPs. Raises when it ran without profiling."""
        if self.profile is None:
            raise OptionError(
                "This placement has no profile to write (it was measured without one): run "
                "ortlab.placement with profiling, or write a ProfileResult's to_perfetto."
            )
        return write_perfetto(
            self.profile.data,
            path,
            model_name=self.profile.model,
            config=self.profile.config,
            join=self.trace_join(),
            model=model,
        )

    def to_pandas(self) -> Table:
        """The per-original-node join (:attr:`nodes`): node, op_type, status, optimized,
        provider, partition, us_per_run, group_us_per_run, share, time_source."""
        return self.nodes


def _listed(row: NodeRow | OptimizedRow) -> dict[str, object]:
    """A row's fields for its table, name tuples as lists (a tuple in a cell is read by
    ``.loc`` as one key per axis; the tables showed lists before the rows held tuples)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in row.__dict__.items()}


def _cols(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _primaries(placement: PlacementResult) -> dict[str, str]:
    """Per kernel, the original node it is named after: the one the join credited its time to,
    else the one whose op the kernel computes (the MatMul of a FusedGemm), else the one whose op
    its op type names, else the first in the model's order."""
    rows = {r.node: r for r in placement.node_rows}
    order = {name: i for i, name in enumerate(rows)}
    out = {}
    for opt in placement.optimized_rows:
        members = [rows[m] for m in opt.fused_from if m in rows]
        if not members:
            continue
        members.sort(key=lambda r: order[r.node])
        op = opt.op_type
        tests = (
            lambda r: r.time_source.startswith("measured"),
            lambda r, op=op: op in KERNELS_FOR.get(r.op_type, ()),
            lambda r, op=op: bool(r.op_type) and r.op_type in op,
        )
        out[opt.node] = next(
            (hits[0].node for test in tests if len(hits := [r for r in members if test(r)]) == 1),
            members[0].node,
        )
    return out
