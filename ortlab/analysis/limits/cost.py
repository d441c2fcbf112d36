"""``ortlab.cost``: what each node computes and moves (FLOPs, bytes, intensity) at the shapes one
run of the model really had — computed from shapes, not measured.

One profiled run in the worker records every tensor's shape as ORT ran it (so dims follow the
model's own logic: a detector's 8400 boxes, a Loop's iterations), and the formulas in
:mod:`ortlab.analysis.limits.formulas` turn them into counts. At the default level ('disabled') the
rows are the model's own nodes; under a config (``config={"level": "all"}``) they are the
kernels ORT runs (FusedConv, NCHWc Conv, FusedMatMul…), which is what ``ortlab.roofline`` reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Unpack

import numpy as np

from ortlab.analysis.limits.formulas import NodeCost, Tensor, node_cost
from ortlab.core.config import SessionConfig
from ortlab.core.eps import INSERTED_CAST
from ortlab.core.model import ModelLike
from ortlab.core.result import Result, Table, table
from ortlab.core.units import fmt_bytes, fmt_flops
from ortlab.engine import tasks_cost
from ortlab.engine.calls import Reach, edge, run_model_task
from ortlab.engine.replies import GraphNode, ShapesReply
from ortlab.engine.trace import types_text

if TYPE_CHECKING:
    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike

__all__ = ["CostResult", "CostRow", "cost", "cost_rows"]

COUNTED = "computed from shapes (not measured)"


@dataclass(frozen=True)
class CostRow:
    """One node of the graph ORT ran, over one run of the model."""

    node: str
    op_type: str
    provider: str
    calls: float
    """Calls per run (a Loop body's nodes run once per iteration)."""
    flops: float
    """Per run: calls times the FLOPs of one call (NaN where ortlab has no formula)."""
    bytes: float
    """Per run: calls times the bytes one call reads and writes, weights included."""
    bytes_written: float
    dtype: str
    kind: str
    note: str
    inputs: str
    """The shapes counted: ``float[1, 3, 224, 224], float[64, 3, 7, 7]``."""
    outputs: str
    ort_bytes: float
    """The same call's input + output bytes as ORT's profile recorded them (-1 where it did
    not list every input: a pre-packed weight is released and not listed)."""

    @property
    def intensity(self) -> float:
        """FLOPs per byte (arithmetic intensity)."""
        return self.flops / self.bytes if self.bytes > 0 else math.nan


@dataclass(frozen=True)
class CostResult(Result):
    """Per node FLOPs and bytes at one run's shapes: **computed** from the shapes, a
    prediction of the work, not a measurement of it.

    ``to_pandas()``: node, op_type, flops, bytes, intensity, then calls, dtype, kind, provider,
    note, inputs, outputs. ``by_op_type``: the same summed per op type. ``plot()``: FLOPs and
    bytes per op type.
    """

    model: str
    config: SessionConfig
    rows: list[CostRow]
    feeds: str = ""
    synthetic: bool | None = None
    notes: list[str] = field(default_factory=list)
    runs_counted: int = 1

    @property
    def total_flops(self) -> float:
        """FLOPs of one run, over the nodes with a formula (``unknown`` lists the others)."""
        return float(sum(r.flops for r in self.rows if not math.isnan(r.flops)))

    @property
    def total_bytes(self) -> float:
        return float(sum(r.bytes for r in self.rows if not math.isnan(r.bytes)))

    @property
    def unknown(self) -> list[str]:
        """Op types ortlab has no formula for (their FLOPs are NaN, not 0)."""
        return sorted({r.op_type for r in self.rows if r.kind == "unknown"})

    def to_pandas(self) -> Table:
        """The per-node table (:attr:`nodes`): node, op_type, flops, bytes, intensity, calls,
        dtype, kind, provider, note, inputs, outputs; most FLOPs first."""
        return self.nodes

    @table
    def nodes(self) -> Table:
        """One row per node, most FLOPs first."""
        import pandas as pd

        cols = [
            "node",
            "op_type",
            "flops",
            "bytes",
            "intensity",
            "calls",
            "dtype",
            "kind",
            "provider",
            "note",
            "inputs",
            "outputs",
        ]
        frame = pd.DataFrame(
            [
                (
                    r.node,
                    r.op_type,
                    r.flops,
                    r.bytes,
                    r.intensity,
                    r.calls,
                    r.dtype,
                    r.kind,
                    r.provider,
                    r.note,
                    r.inputs,
                    r.outputs,
                )
                for r in self.rows
            ],
            columns=cols,
        )
        return frame.sort_values("flops", ascending=False, kind="stable", na_position="last")

    @table
    def by_op_type(self) -> Table:
        """FLOPs, bytes, nodes and share of the model's FLOPs per op type, most FLOPs first."""
        frame = self.nodes
        out = frame.groupby("op_type").agg(
            nodes=("node", "size"),
            flops=("flops", lambda s: s.sum(min_count=1)),
            bytes=("bytes", "sum"),
        )
        out["intensity"] = out["flops"] / out["bytes"].where(out["bytes"] > 0)
        out["flops_share"] = out["flops"] / (self.total_flops or math.nan)
        return out.sort_values("flops", ascending=False, na_position="last").reset_index()

    def __repr__(self) -> str:
        return (
            f"<CostResult {self.model}: {fmt_flops(self.total_flops)}, "
            f"{fmt_bytes(self.total_bytes)} moved per run, {len(self.rows)} nodes ({COUNTED})>"
        )


def _shape(reply: ShapesReply, name: str) -> Tensor | None:
    if not name:
        return None
    return reply.tensors.get(name)


def _filled(
    ins: list[Tensor | None], names: tuple[str, ...], listed: tuple[Tensor, ...]
) -> list[Tensor | None]:
    """Shapes the graph cannot say (a Scan body's own inputs) from the profile, where ORT
    listed every input of the node (so its list lines up with the node's inputs)."""
    if len(listed) != sum(1 for t in names if t) or all(s is not None for s in ins):
        return ins
    recorded = iter(listed)
    out: list[Tensor | None] = []
    for name, known in zip(names, ins, strict=True):
        seen = next(recorded) if name else None
        out.append(known if known is not None else seen)
    return out


def cost_rows(reply: ShapesReply) -> tuple[list[CostRow], list[str]]:
    """One :class:`CostRow` per node that ran, from the worker's shapes; and notes (nodes that
    did not run, shapes recorded from one of several calls)."""
    d = reply.data
    runs = max(len(d.run_us), 1)
    calls = np.bincount(np.asarray(d.ev_node, dtype=np.int64), minlength=len(d.node)) / runs
    by_name: dict[str, GraphNode] = {}
    for n in reply.nodes:
        if n.name:
            by_name.setdefault(n.name, n)
    rows: list[CostRow] = []
    varying = 0
    sizes = (d.activation_bytes, d.parameter_bytes, d.output_bytes)
    recorded = all(len(s) == len(d.node) for s in sizes)  # traces older than the size fields
    for i, name in enumerate(d.node):
        g = by_name.get(name)
        if g is None:  # a node the saved graph does not hold: use the profile's own record
            ins: list[Tensor | None] = list(d.input_types[i])
            outs: list[Tensor | None] = list(d.output_types[i])
            c = node_cost(d.op_type[i], ins, outs)  # (a node ORT made: Softmax's expansion)
        else:
            ins = _filled([_shape(reply, t) for t in g.inputs], g.inputs, d.input_types[i])
            outs = [_shape(reply, t) for t in g.outputs]
            c = node_cost(g.op_type, ins, outs, dict(g.attrs), g.domain)
            missing = [t for t, s in zip(g.inputs, ins, strict=True) if t and s is None]
            if missing:
                c = NodeCost(
                    math.nan,
                    math.nan,
                    c.bytes_written,
                    c.dtype,
                    c.kind,
                    f"shape of {', '.join(missing[:3])} unknown",
                )
        ort = -1.0
        if recorded and len(d.input_types[i]) == sum(1 for s in ins if s is not None):
            parts = [s[i] for s in sizes]
            ort = float(sum(parts)) if min(parts) >= 0 else -1.0
        k = float(calls[i])
        varying += k > 1
        rows.append(
            CostRow(
                node=name,
                op_type=d.op_type[i],
                provider=d.provider[i],
                calls=k,
                flops=c.flops * k,
                bytes=c.bytes * k,
                bytes_written=c.bytes_written * k,
                dtype=c.dtype,
                kind=c.kind,
                note=c.note,
                inputs=types_text(tuple(s for s in ins if s is not None)),
                outputs=types_text(tuple(s for s in outs if s is not None)),
                ort_bytes=ort,
            )
        )
    notes = []
    inserted = [r for r in rows if r.node.startswith(INSERTED_CAST)]
    if inserted:
        notes.append(
            f"ORT inserted {len(inserted)} Cast node(s) to run nodes its EP has no "
            "kernel for at their precision (fp16 on the CPU EP) in float: those "
            "nodes count as fp32 work, plus the casts."
        )
    ran = set(d.node)
    idle = [n.name for n in reply.nodes if n.name and n.name not in ran]
    if idle:
        notes.append(
            f"{len(idle)} node(s) did not run (a branch not taken, or nothing to do): "
            f"no cost, e.g. {', '.join(idle[:3])}."
        )
    if varying:
        notes.append(
            f"{varying} node(s) run several times per run (a Loop or Scan body): each "
            "call is counted at the shapes ORT recorded for one of them."
        )
    return rows, notes


def cost(
    model: ModelLike,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    **reach: Unpack[Reach],
) -> CostResult:
    """FLOPs, bytes (read + written, weights included) and intensity per node at ``dims``
    (or the shapes of ``feeds``), **computed** from the shapes of one run, not measured.

    It counts the kernels ORT runs under ``config`` (fused and re-laid-out ones included), as
    every verb runs it: the graph ``ortlab.roofline`` times under the same config. To count
    the model's own nodes, pass ``{"level": "disabled"}``.

    ``dims``, ``progress`` and ``timeout`` as every verb takes them (:class:`Reach`).
    """
    run = edge(model, config, feeds, **reach)
    reply = run_model_task(tasks_cost.shapes, run)
    rows, notes = cost_rows(reply)
    unknown = sorted({r.op_type for r in rows if math.isnan(r.flops) and r.kind == "unknown"})
    if unknown:
        notes.append(
            f"No formula for {', '.join(unknown)}: their FLOPs are unknown (NaN) and "
            "left out of the totals; their bytes are counted."
        )
    notes.append(
        f"Counts are {COUNTED}: the work the shapes imply, at the inputs described "
        "below; ortlab.roofline sets them against measured times."
    )
    notes.extend(run.inputs.notes)
    return CostResult(
        model=run.model.name,
        config=run.config,
        rows=rows,
        feeds=run.inputs.describe(),
        synthetic=run.synthetic,
        notes=notes,
    )
