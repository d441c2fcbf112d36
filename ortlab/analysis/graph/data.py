"""The model as graph data for the graph view: nodes joined with EP, time and quantization
error, edges marked where they cross EPs, and a hierarchy of name scopes.

Pure data (no UI import): the graph view (:mod:`ortlab.views.graph`: its packing into the wire
form, the widget, the self-contained page and the browser's modules) draws it. Big graphs are
readable only hierarchically: PyTorch exports name nodes like
``/encoder/layer.0/attention/MatMul``, so scopes become groups (collapsed by default when the
graph is large). Tensors that feed many nodes (attention masks, shared shape constants) are
drawn as per-consumer "ghost" stubs, as TensorBoard does: such broadcast edges dominate every
layout engine and hide the structure.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

import onnx
from onnx import numpy_helper

from ortlab.analysis.graph.blocks import chunk_siblings, initial_expanded, regroup
from ortlab.analysis.graph.drafts import BODY, Draft, drafts, scoped_producers
from ortlab.analysis.graph.elements import GraphEdge, GraphGroup, GraphNode
from ortlab.analysis.graph.inferred import flops_at, run_types, tensor_types
from ortlab.analysis.graph.roof import RoofMark, roof_marks
from ortlab.analysis.graph.scopes import raw_name
from ortlab.core import gcpause
from ortlab.core.errors import OrtlabWarning
from ortlab.core.inputs import default_shapes
from ortlab.core.model import Model, ModelLike, load
from ortlab.core.onnx_util import dtype_name, walk_nodes
from ortlab.core.result import Result, Table

if TYPE_CHECKING:
    from ortlab.analysis.diff import DiffResult
    from ortlab.analysis.diverge import DivergenceResult
    from ortlab.analysis.limits.roofline import RooflineResult
    from ortlab.analysis.placement.result import NodeRow, PlacementResult
    from ortlab.analysis.profiling import ProfileResult
    from ortlab.analysis.quantization.error import ErrorResult
    from ortlab.core.graph import OpNode

__all__ = ["BODY", "GraphData", "graph_data", "in_branch", "overview", "tensor_types"]

"""Between an If/Loop/Scan and its body's attribute in a body's group ('optimum::if ▸
then_branch')."""

GHOST_FANOUT = 8
"""Tensors with more consumers than this are drawn as ghost stubs."""


def in_branch(nodes: Sequence[GraphNode], name: str, branch: str) -> str:
    """The node named ``name`` (ortlab's ``#k`` suffix aside) in an If's body ``branch``
    ('then_branch', 'else_branch'): the twin that ran where both branches hold the name;
    ``name`` itself when no node of that body has it."""
    raw = raw_name(name)
    tag = f"{BODY} {branch}"
    return next((n.name for n in nodes if raw_name(n.name) == raw and tag in n.group), name)


@dataclass(frozen=True)
class GraphData(Result):
    model: str
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    groups: list[GraphGroup]
    tensors: dict[str, str]
    """Tensor name -> 'dtype[shape]' where known."""
    providers: list[str]
    expanded: list[str]
    """Groups expanded in the initial view."""
    has_time: bool
    has_quant: bool
    has_memory: bool = False
    has_diff: bool = False
    has_roofline: bool = False
    """Some node shows a roofline ``achieved_fraction``."""
    notes: list[str] = field(default_factory=list)
    constants: int = 0
    """Constant nodes folded into their consumers (not drawn; typed in ``tensors``)."""
    identities: int = 0
    """Identity nodes that pass a weight on unchanged, folded into their consumers (not
    drawn): with :attr:`constants` and the drawn nodes, the model's nodes, bodies included."""
    inputs: list[str] = field(default_factory=list)
    """The graph's inputs (initializers excluded): drawn as items of their own."""
    outputs: list[str] = field(default_factory=list)

    def to_pandas(self) -> Table:
        """One row per node as the view draws it: name, op_type, group, provider, us_per_run,
        share, status."""
        import pandas as pd

        cols = ["name", "op_type", "group", "provider", "us_per_run", "share", "status"]
        return pd.DataFrame([{c: getattr(n, c) for c in cols} for n in self.nodes], columns=cols)

    def overview(self) -> Table:
        """The first picture, one row per item drawn: name (a group's label, a node's or a
        graph input's/output's name), kind ('input', 'group', 'node', 'output'), nodes,
        time_share, providers ({EP: nodes})."""
        return overview(self, self.expanded)

    def __repr__(self) -> str:
        return (
            f"<GraphData {self.model!r}: {len(self.nodes)} nodes, {len(self.edges)} edges, "
            f"{len(self.groups)} scope groups, {sum(e.boundary for e in self.edges)} EP "
            "boundary edges>"
        )


def overview(graph: GraphData, expanded: Iterable[str]) -> Table:
    """Items drawn with these groups ``expanded``: the same rule as the browser's data.js (a
    node shows as its outermost collapsed group)."""
    import pandas as pd

    open_ = set(expanded)
    groups = {g.id: g for g in graph.groups}
    items: dict[tuple[str, Any], list[GraphNode]] = {}
    for n in graph.nodes:
        chain, g = [], n.group
        while g:
            chain.append(g)
            g = groups[g].parent if g in groups else ""
        owner = next((c for c in reversed(chain) if c not in open_), None)
        items.setdefault(("group", owner) if owner else ("node", n.id), []).append(n)
    rows = [
        *(
            {"name": t, "kind": "input", "nodes": 0, "time_share": 0.0, "providers": {}}
            for t in graph.inputs
        ),
        *(
            {
                "name": groups[key].label if kind == "group" else members[0].name,
                "kind": kind,
                "nodes": len(members),
                "time_share": sum(m.share for m in members),
                "providers": dict(Counter(m.provider for m in members if m.provider)),
            }
            for (kind, key), members in items.items()
        ),
        *(
            {"name": t, "kind": "output", "nodes": 0, "time_share": 0.0, "providers": {}}
            for t in graph.outputs
        ),
    ]
    return pd.DataFrame(rows, columns=["name", "kind", "nodes", "time_share", "providers"])


def _attr_text(attr: onnx.AttributeProto) -> str:
    value = onnx.helper.get_attribute_value(attr)
    if attr.type == onnx.AttributeProto.TENSOR:
        arr = numpy_helper.to_array(attr.t)
        return f"tensor {dtype_name(attr.t.data_type)}{list(arr.shape)}" + (
            f" = {arr.ravel()[:4].tolist()}" if arr.size <= 4 else ""
        )
    if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
        graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        return ", ".join(f"subgraph ({len(g.node)} nodes)" for g in graphs)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")[:200]
    if isinstance(value, list):
        text = str(
            [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value[:16]]
        )
        return text + (" …" if len(value) > 16 else "")
    return str(value)[:200]


SQNR_CAP_DB = 120.0
"""A node's error in the graph: the lowest SQNR of its outputs, at most this (an identical
output, inf dB, reads as no error on the scale)."""


def _joins(
    placement: PlacementResult | None, error: ErrorResult | DivergenceResult | None
) -> tuple[dict[str, NodeRow], dict[str, float]]:
    rows = {r.node: r for r in placement.node_rows} if placement is not None else {}
    sq: dict[str, float] = {}
    if error is not None:
        for t in error.tensors:
            sq[t.node] = min(sq.get(t.node, SQNR_CAP_DB), t.sqnr_db)
    return rows, sq


def _mean_fraction(nodes: list[GraphNode]) -> float | None:
    marked = [n for n in nodes if n.achieved_fraction is not None]
    weight = sum(n.us_per_run for n in marked)
    if not marked:
        return None
    if weight <= 0:
        return sum(n.achieved_fraction or 0.0 for n in marked) / len(marked)
    return sum((n.achieved_fraction or 0.0) * n.us_per_run for n in marked) / weight


def _groups(nodes: list[GraphNode], edges: list[GraphEdge]) -> list[GraphGroup]:
    members: dict[str, list[GraphNode]] = defaultdict(list)
    for n in nodes:
        path = n.group
        while path:
            members[path].append(n)
            path = path.rsplit("/", 1)[0]
    crossing: Counter[str] = Counter()
    for e in edges:
        if not e.boundary:
            continue
        a, b = nodes[e.src].group, nodes[e.dst].group
        while a:  # every group holding both ends
            if b == a or b.startswith(a + "/"):
                crossing[a] += 1
            a = a.rsplit("/", 1)[0]
    out = []
    for gid in sorted(members, key=lambda g: (g.count("/"), g)):
        inside = members[gid]
        out.append(
            GraphGroup(
                id=gid,
                label=gid.rsplit("/", 1)[-1],
                parent=gid.rsplit("/", 1)[0],
                depth=gid.count("/"),
                size=len(inside),
                providers=dict(Counter(n.provider for n in inside if n.provider)),
                us_per_run=sum(n.us_per_run for n in inside),
                boundaries=crossing[gid],
                share=sum(n.share for n in inside),
                achieved_fraction=_mean_fraction(inside),
                sqnr_db=min((n.sqnr_db for n in inside if n.sqnr_db is not None), default=None),
            )
        )
    return out


def _warn_unmatched(profiled: set[str], names: set[str]) -> None:
    """A profile names the nodes of ORT's *optimized* graph: fused nodes are not in the model."""
    missing = profiled - names
    if missing:
        import warnings

        warnings.warn(
            f"{len(missing)} of {len(profiled)} profiled nodes are not nodes of this model "
            f"(ORT fused or renamed them, e.g. {sorted(missing)[:3]}), so their time is not "
            "shown. Pass placement=ortlab.placement(model, config) instead: it maps every "
            "optimized node back to the original nodes it came from.",
            OrtlabWarning,
            stacklevel=4,  # the caller of graph_data
        )


class RoofFields(TypedDict, total=False):
    """A node's roofline fields (``GraphNode``'s), where the roofline marks it."""

    achieved_fraction: float
    roof_bound: str
    roof_ceiling: str


def _roof_fields(mark: RoofMark | None) -> RoofFields:
    if mark is None:
        return {}
    return {
        "achieved_fraction": mark.fraction,
        "roof_bound": mark.bound,
        "roof_ceiling": mark.ceiling,
    }


def _node(
    i: int,
    draft: Draft,
    group: str,
    *,
    op: OpNode,
    raw: onnx.NodeProto,
    row: NodeRow | None,
    provider: str,
    total_time: float,
    sq: dict[str, float],
    changes: dict[str, tuple[float | None, str]],
    roof: dict[str, RoofMark],
) -> GraphNode:
    us = draft.us_per_run
    return GraphNode(
        id=i,
        name=op.name,
        op_type=op.op_type,
        domain=op.domain,
        group=group,
        provider=provider,
        us_per_run=us,
        share=us / total_time if total_time else 0.0,
        status=row.status if row else "",
        optimized=list(row.optimized) if row else [],
        group_us_per_run=row.group_us_per_run if row else us,
        time_source=row.time_source if row else ("measured" if us else ""),
        partition=row.partition if row else -1,
        sqnr_db=sq.get(op.name),
        inputs=draft.inputs,
        outputs=draft.outputs,
        attrs={a.name: _attr_text(a) for a in raw.attribute},
        reason=row.reason if row else "",
        output_bytes=row.output_bytes if row else -1,
        delta_us=changes[op.name][0] if op.name in changes else None,
        diff_verdict=changes[op.name][1] if op.name in changes else "",
        predicted=bool(row and row.time_source.startswith("predicted")),
        **_roof_fields(roof.get(op.name)),
        body=op.parent or "",
    )


def graph_data(
    model: ModelLike,
    placement: PlacementResult | None = None,
    profile: ProfileResult | None = None,
    error: ErrorResult | DivergenceResult | None = None,
    diff: DiffResult | None = None,
    *,
    roofline: RooflineResult | None = None,
) -> GraphData:
    """Build the view's data from a model and, optionally, a placement (EP, time, fusion), a
    profile (time by node name, used when no placement is given; a roofline's own profile
    when neither is), a quantization error, a diff and a roofline (each node's
    ``achieved_fraction``: :mod:`ortlab.analysis.graph.roof`)."""

    with gcpause.held():  # ~10 objects a node, all kept: young collections only promote them
        return _graph_data(
            load(model),
            placement=placement,
            profile=profile,
            error=error,
            diff=diff,
            roofline=roofline,
        )


def _graph_data(
    m: Model,
    *,
    placement: PlacementResult | None,
    profile: ProfileResult | None,
    error: ErrorResult | DivergenceResult | None,
    diff: DiffResult | None,
    roofline: RooflineResult | None,
) -> GraphData:
    graph = m.proto.graph
    if roofline is not None and placement is None and profile is None:
        profile = roofline.profile
    roof, roof_notes = (
        roof_marks(roofline, placement, (op.name for op, _ in m.node_protos))
        if roofline is not None
        else ({}, [])
    )
    rows, sq = _joins(placement, error)
    changes = (
        {r.node: (r.delta_us if r.delta_us == r.delta_us else None, r.verdict) for r in diff.rows}
        if diff is not None
        else {}
    )
    prof_time: dict[str, tuple[str, float]] = {}
    if profile is not None and placement is None:
        t = profile.by_node()
        runs = max(profile.runs, 1)
        prof_time = {r.node: (r.provider, r.self_us / runs) for r in t.itertuples()}
        _warn_unmatched(set(prof_time), {n.name for n, _ in walk_nodes(graph)})
    total_time = sum(r.us_per_run for r in rows.values()) or sum(v for _, v in prof_time.values())
    kept, drafted, constants, passed = drafts(m, rows, prof_time)
    folded = sum(  # Constant nodes, each (two If branches may name their outputs alike)
        op.op_type == "Constant" and not op.domain and len(op.outputs) == 1
        for op, _ in m.node_protos
    )
    fanout = Counter(t for n in drafted for t in dict.fromkeys(n.inputs) if t)
    flops = None  # nothing measured: blocks are named by FLOPs at the run's or guessed shapes
    if not total_time:
        flops = flops_at(m, getattr(placement, "input_shapes", None) or default_shapes(m.signature))
    ghosts = {t for t, c in fanout.items() if c > GHOST_FANOUT}
    groups_of = chunk_siblings(regroup(drafted, ghosts, flops))
    nodes = [
        _node(
            i,
            draft,
            group,
            op=op,
            raw=raw,
            row=row,
            provider=provider,
            total_time=total_time,
            sq=sq,
            changes=changes,
            roof=roof,
        )
        for i, (draft, group, (op, raw, row, provider)) in enumerate(
            zip(drafted, groups_of, kept, strict=True)
        )
    ]
    producers = scoped_producers(nodes)
    consumers: dict[tuple[int, str], list[int]] = defaultdict(list)
    for n in nodes:
        for t in n.inputs:
            src = producers(n.id, t)
            if src is not None:
                consumers[(src, t)].append(n.id)
    edges = [
        GraphEdge(
            src=src,
            dst=d,
            tensor=t,
            boundary=bool(
                nodes[src].provider
                and nodes[d].provider
                and nodes[src].provider != nodes[d].provider
            ),
            ghost=len(dsts) > GHOST_FANOUT,
        )
        for (src, t), dsts in consumers.items()
        for d in dsts
    ]
    groups = _groups(nodes, edges)
    providers = list(dict.fromkeys(n.provider for n in nodes if n.provider))
    weights = {t.name for t in graph.initializer}
    inputs = [i.name for i in graph.input if i.name not in weights]
    return GraphData(
        model=m.name,
        nodes=nodes,
        edges=edges,
        groups=groups,
        tensors=run_types(m, placement, nodes, constants),
        providers=providers,
        expanded=initial_expanded(groups, len(nodes), len(inputs) + len(graph.output)),
        has_time=bool(total_time),
        has_quant=bool(sq),
        has_memory=any(n.output_bytes > 0 for n in nodes),
        has_diff=bool(changes),
        has_roofline=bool(roof),
        notes=[
            *(
                [
                    f"{sum(e.ghost for e in edges)} edges of tensors feeding more than "
                    f"{GHOST_FANOUT} nodes are drawn as stubs"
                ]
                if any(e.ghost for e in edges)
                else []
            ),
            *(
                [
                    f"{folded} Constant nodes are folded into their consumers "
                    "(their value's type and shape show in the consumer's details)"
                ]
                if folded
                else []
            ),
            *(
                [
                    f"{passed} Identity nodes that pass a weight on unchanged (an optimum merged "
                    "decoder's If branches return its shared initializers so) are folded into "
                    "their consumers, the weight named in their details"
                ]
                if passed
                else []
            ),
            *roof_notes,
        ],
        constants=folded,
        identities=passed,
        inputs=inputs,
        outputs=[o.name for o in graph.output],
    )
