"""The model as graph data for the graph view: nodes joined with EP, time and quantization
error, edges marked where they cross EPs, and a hierarchy of name scopes.

Pure data (no UI import): the widget (:mod:`ortlab.views.widgets.graph`) and the self-contained HTML
export draw it. Big graphs are readable only hierarchically: PyTorch exports name nodes like
``/encoder/layer.0/attention/MatMul``, so scopes become groups (collapsed by default when the
graph is large). Tensors that feed many nodes (attention masks, shared shape constants) are
drawn as per-consumer "ghost" stubs, as TensorBoard does: such broadcast edges dominate every
layout engine and hide the structure.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import onnx
from onnx import numpy_helper

from ortlab.analysis.graphmap import graph_node_protos
from ortlab.core.errors import OrtlabWarning
from ortlab.core.model import ModelLike, load
from ortlab.core.onnx_util import dtype_name, inferred_graph, value_info_shape, walk_nodes
from ortlab.core.result import Result

if TYPE_CHECKING:
    pass

__all__ = ["GraphData", "graph_data"]

GHOST_FANOUT = 8
"""Tensors with more consumers than this are drawn as ghost stubs."""
COLLAPSE_ABOVE = 60
"""Graphs with more nodes start with scope groups collapsed, opened level by level while at
most this many items are visible: a 2,000-node graph fitted flat is an unreadable line."""


@dataclass(frozen=True)
class GraphNode:
    id: int
    name: str
    op_type: str
    domain: str
    group: str
    """Id of the innermost scope group ('' for the root)."""
    provider: str = ""
    us_per_run: float = 0.0
    share: float = 0.0
    status: str = ""
    optimized: list[str] = field(default_factory=list)
    partition: int = -1
    """EP partition id from the placement (-1 without one)."""
    sqnr_db: float | None = None
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    attrs: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    """Why the node is not on the EP the session wanted (placement / whatif ``reason``)."""
    predicted: bool = False
    """The provider is a prediction (``ortlab.whatif``: compiled or rules), not a run: the
    view draws such nodes hatched, and shows no time for them."""


@dataclass(frozen=True)
class GraphEdge:
    src: int
    dst: int
    tensor: str
    boundary: bool
    """Producer and consumer run on different execution providers."""
    ghost: bool
    """The tensor feeds many nodes: drawn as a stub at the consumer, not a long edge."""


@dataclass(frozen=True)
class GraphGroup:
    id: str
    label: str
    parent: str
    depth: int
    size: int
    """Nodes inside, nested groups included."""
    providers: dict[str, int]
    us_per_run: float


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
    notes: list[str] = field(default_factory=list)

    def to_pandas(self) -> Any:
        """One row per node as the view draws it: name, op_type, group, provider, us_per_run,
        share, status."""
        import pandas as pd

        cols = ["name", "op_type", "group", "provider", "us_per_run", "share", "status"]
        return pd.DataFrame([{c: getattr(n, c) for c in cols} for n in self.nodes], columns=cols)

    def __repr__(self) -> str:
        return (
            f"<GraphData {self.model!r}: {len(self.nodes)} nodes, {len(self.edges)} edges, "
            f"{len(self.groups)} scope groups, {sum(e.boundary for e in self.edges)} EP "
            "boundary edges>"
        )


def _scope(name: str) -> list[str]:
    parts = [p for p in name.split("/") if p]
    return parts[:-1] if name.startswith("/") or len(parts) > 1 else []


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


def _tensor_types(model: onnx.ModelProto) -> dict[str, str]:
    """dtype[shape] of every tensor ONNX shape inference can type (weights not needed)."""
    out = {}
    graph = inferred_graph(model)
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        shape = value_info_shape(vi)
        dims = (
            "?"
            if shape is None
            else "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
        )
        out[vi.name] = f"{dtype_name(vi.type.tensor_type.elem_type)}{dims}"
    for t in graph.initializer:
        out[t.name] = f"{dtype_name(t.data_type)}{list(t.dims)} (initializer)"
    return out


def _joins(placement: Any, error: Any) -> tuple[dict[str, Any], dict[str, float]]:
    rows = {r.node: r for r in placement.node_rows} if placement is not None else {}
    sq: dict[str, float] = {}
    if error is not None:
        for t in error.tensors:
            sq[t.node] = min(sq.get(t.node, float("inf")), t.sqnr_db)
    return rows, sq


def _groups(nodes: list[GraphNode]) -> list[GraphGroup]:
    members: dict[str, list[GraphNode]] = defaultdict(list)
    for n in nodes:
        path = n.group
        while path:
            members[path].append(n)
            path = path.rsplit("/", 1)[0]
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
            )
        )
    return out


def _initial_expanded(groups: list[GraphGroup], total: int) -> list[str]:
    """Expand scope levels from the top while the visible item count stays readable."""
    if total <= COLLAPSE_ABOVE:
        return [g.id for g in groups]
    expanded: list[str] = []
    for depth in range(1, 1 + max((g.depth for g in groups), default=0)):
        level = [g for g in groups if g.depth == depth]
        candidate = expanded + [g.id for g in level]
        visible = _visible_count(groups, set(candidate), total)
        if visible > COLLAPSE_ABOVE:
            break
        expanded = candidate
    return expanded


def _visible_count(groups: list[GraphGroup], expanded: set[str], total: int) -> int:
    hidden = 0
    shown_collapsed = 0
    for g in groups:
        parent_open = g.depth == 1 or g.parent in expanded
        if parent_open and g.id not in expanded:
            hidden += g.size
            shown_collapsed += 1
    return total - hidden + shown_collapsed


def _blocks(nodes: list[GraphNode]) -> list[str]:
    """Group ids for graphs without name scopes: cut the topological order wherever a single
    tensor is live (between ResNet bottlenecks, after a transition layer) and name each segment
    by its ops, so repeated blocks read as such ("block 07: Conv x3, … (like block 03)")."""
    n = len(nodes)
    index = {t: n_.id for n_ in nodes for t in n_.outputs if t}
    last_use = dict.fromkeys(index, -1)
    for node in nodes:
        for t in node.inputs:
            if t in last_use:
                last_use[t] = max(last_use[t], node.id)
    live = [0] * (n + 1)
    for t, p in index.items():
        if last_use[t] > p:
            live[p] += 1
            live[last_use[t]] -= 1
    cuts, running = [], 0
    for i in range(n):
        running += live[i]
        if running <= 1:
            cuts.append(i)
    segments: list[list[int]] = []
    start = 0
    for c in cuts:
        if c - start + 1 >= 3:  # tiny segments join the next one
            segments.append(list(range(start, c + 1)))
            start = c + 1
    if start < n:
        segments.append(list(range(start, n)))
    width = len(str(len(segments)))
    seen: dict[str, int] = {}
    group = [""] * n
    for k, seg in enumerate(segments, 1):
        ops = Counter(nodes[i].op_type for i in seg)
        sig = ", ".join(f"{op}×{c}" if c > 1 else op for op, c in sorted(ops.items()))
        first = seen.setdefault(sig, k)
        like = f" (like block {first:0{width}d})" if first != k else ""
        label = f"block {k:0{width}d}: {sig}{like}"
        for i in seg:
            group[i] = "/" + label.replace("/", "∕")
    return group


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
            stacklevel=3,
        )


def graph_data(
    model: ModelLike, placement: Any = None, profile: Any = None, error: Any = None
) -> GraphData:
    """Build the view's data from a model and, optionally, a placement (EP, time, fusion), a
    profile (time by node name, used when no placement is given) and a quantization error."""

    m = load(model)
    graph = m.proto.graph
    rows, sq = _joins(placement, error)
    prof_time: dict[str, tuple[str, float]] = {}
    if profile is not None and placement is None:
        t = profile.by_node()
        runs = max(profile.runs, 1)
        prof_time = {r.node: (r.provider, r.self_us / runs) for r in t.itertuples()}
        _warn_unmatched(set(prof_time), {n.name for n, _ in walk_nodes(graph)})
    total_time = sum(r.us_per_run for r in rows.values()) or sum(v for _, v in prof_time.values())
    nodes: list[GraphNode] = []
    body_group: dict[str, str] = {}  # "<owner>/<attr>" -> the group its body nodes open in
    for i, (op, raw) in enumerate(graph_node_protos(graph, subgraphs=True)):
        row = rows.get(op.name)
        scope = _scope(raw.name)  # an unnamed body node's generated name is not a scope
        group = "/" + "/".join(scope) if scope else ""
        if op.parent:  # an If/Loop/Scan body: a group of its own inside its owner's group
            owner, tag = op.parent.rsplit("/", 1)  # attribute names hold no '/'
            if op.parent not in body_group:
                outer = next(n.group for n in reversed(nodes) if n.name == owner)
                body_group[op.parent] = f"{outer}/{owner.replace('/', '∕')} ▸ {tag}"
            group = body_group[op.parent] + group
        provider, us = (row.provider, row.us_per_run) if row else prof_time.get(op.name, ("", 0.0))
        nodes.append(
            GraphNode(
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
                partition=row.partition if row else -1,
                sqnr_db=sq.get(op.name),
                inputs=list(op.inputs),
                outputs=list(op.outputs),
                attrs={a.name: _attr_text(a) for a in raw.attribute},
                reason=row.reason if row else "",
                predicted=bool(row and row.time_source.startswith("predicted")),
            )
        )
    main = [n for n in nodes if not n.group.startswith(tuple(body_group.values()) or ("\0",))]
    scoped = sum(1 for n in main if n.group)
    if len(main) > COLLAPSE_ABOVE and scoped < len(main) / 2:
        cut = _blocks([replace(n, id=k) for k, n in enumerate(main)])  # ids as positions
        blocks = dict(zip([n.id for n in main], cut, strict=True))
        nodes = [replace(n, group=n.group or blocks[n.id]) if n.id in blocks else n for n in nodes]
    producer = {t: n.id for n in nodes for t in n.outputs if t}
    consumers: dict[str, list[int]] = defaultdict(list)
    for n in nodes:
        for t in n.inputs:
            if t in producer:
                consumers[t].append(n.id)
    edges = [
        GraphEdge(
            src=producer[t],
            dst=d,
            tensor=t,
            boundary=bool(
                nodes[producer[t]].provider
                and nodes[d].provider
                and nodes[producer[t]].provider != nodes[d].provider
            ),
            ghost=len(dsts) > GHOST_FANOUT,
        )
        for t, dsts in consumers.items()
        for d in dsts
    ]
    groups = _groups(nodes)
    providers = list(dict.fromkeys(n.provider for n in nodes if n.provider))
    return GraphData(
        model=m.name,
        nodes=nodes,
        edges=edges,
        groups=groups,
        tensors=_tensor_types(m.proto),
        providers=providers,
        expanded=_initial_expanded(groups, len(nodes)),
        has_time=bool(total_time),
        has_quant=bool(sq),
        notes=[
            f"{sum(e.ghost for e in edges)} edges of tensors feeding more than "
            f"{GHOST_FANOUT} nodes are drawn as stubs"
        ]
        if any(e.ghost for e in edges)
        else [],
    )
