"""The nodes a graph view draws, before they are grouped: each original node in model order
with its scope group (If/Loop bodies opened inside their owner's group), its time, its tensors;
what is folded into the nodes that read it (Constant nodes' values, weights an Identity passes
on unchanged); and who produced each tensor a node reads, scoped as ONNX scopes names (a body's
own tensors first, then the graphs around it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import onnx

from ortlab.core.model import Model
from ortlab.core.onnx_util import dtype_name, walk_nodes

if TYPE_CHECKING:
    from ortlab.analysis.graph.elements import GraphNode
    from ortlab.analysis.placement.result import NodeRow
    from ortlab.core.graph import OpNode

__all__ = ["BODY", "Draft", "drafts", "scoped_producers"]

BODY = " ▸"


Kept = tuple["OpNode", onnx.NodeProto, "NodeRow | None", str]
"""A drawn node: its op, its proto, its placement row (None without one) and its provider."""


class Draft(NamedTuple):
    """A node as the block cutter reads it (:class:`~ortlab.analysis.graph.blocks.BlockNode`),
    before its GraphNode is built once, in its final group."""

    name: str
    op_type: str
    group: str
    us_per_run: float
    inputs: list[str]
    outputs: list[str]


def drafts(
    m: Model, rows: dict[str, NodeRow], prof_time: dict[str, tuple[str, float]]
) -> tuple[list[Kept], list[Draft], dict[str, str], int]:
    """Each drawn node (its op, proto, placement row and provider) and its draft (group, time,
    tensors); the tensors folded into their consumers with their types: Constant nodes' values
    and weights an Identity passes on unchanged (optimum's merged decoder returns every shared
    initializer from each If branch through one: 14 boxes a branch that carry no work), and how
    many such Identity nodes were folded."""
    weights = _initializer_types(m.proto.graph)
    kept: list[Kept] = []
    made: list[Draft] = []
    group_of: dict[str, str] = {}  # a node name -> its group (the last so named so far)
    body_group: dict[str, str] = {}  # "<owner>/<attr>" -> the group its body nodes open in
    constants: dict[str, str] = {}
    passed = 0
    for op, raw in m.node_protos:
        if op.op_type == "Constant" and not op.domain and len(op.outputs) == 1:
            constants[op.outputs[0]] = _constant_type(raw)  # folded into its consumers
            continue
        if op.op_type == "Identity" and len(op.inputs) == 1 and op.inputs[0] in weights:
            constants[op.outputs[0]] = f"{weights[op.inputs[0]]} (weight {op.inputs[0]})"
            passed += 1
            continue
        row = rows.get(op.name)
        scope = _scope(raw.name)  # an unnamed body node's generated name is not a scope
        group = "/" + "/".join(scope) if scope else ""
        if op.parent:  # an If/Loop/Scan body: a group of its own inside its owner's group
            owner, tag = op.parent.rsplit("/", 1)  # attribute names hold no '/'
            if op.parent not in body_group:
                outer = group_of[owner]
                body_group[op.parent] = f"{outer}/{owner.replace('/', '∕')}{BODY} {tag}"
            group = body_group[op.parent] + group
        group_of[op.name] = group
        provider, us = (row.provider, row.us_per_run) if row else prof_time.get(op.name, ("", 0.0))
        kept.append((op, raw, row, provider))
        made.append(Draft(op.name, op.op_type, group, us, list(op.inputs), list(op.outputs)))
    return kept, made, constants, passed


def _initializer_types(graph: onnx.GraphProto) -> dict[str, str]:
    """Every initializer's 'dtype[shape]', the bodies' too."""
    out = {t.name: f"{dtype_name(t.data_type)}{list(t.dims)}" for t in graph.initializer}
    for node, _ in walk_nodes(graph):
        for a in node.attribute:
            for body in [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs):
                out |= {
                    t.name: f"{dtype_name(t.data_type)}{list(t.dims)}" for t in body.initializer
                }
    return out


def _scope(name: str) -> list[str]:
    parts = [p for p in name.split("/") if p]
    return parts[:-1] if name.startswith("/") or len(parts) > 1 else []


def _constant_type(node: onnx.NodeProto) -> str:
    """'dtype[shape] (constant)' of a Constant node's value."""
    for a in node.attribute:
        if a.type == onnx.AttributeProto.TENSOR:
            return f"{dtype_name(a.t.data_type)}{list(a.t.dims)} (constant)"
        if a.type == onnx.AttributeProto.SPARSE_TENSOR:
            sparse = a.sparse_tensor
            return f"{dtype_name(sparse.values.data_type)}{list(sparse.dims)} (constant)"
        if a.name.endswith(("s", "_ints", "_floats", "_strings")) and a.name != "value_string":
            kind = {"value_ints": "int64", "value_floats": "float", "value_strings": "string"}
            n = len(onnx.helper.get_attribute_value(a))
            return f"{kind.get(a.name, '?')}[{n}] (constant)"
        kind = {"value_int": "int64", "value_float": "float", "value_string": "string"}
        return f"{kind.get(a.name, '?')}[] (constant)"
    return "? (constant)"


def scoped_producers(nodes: Sequence[GraphNode]) -> Callable[[int, str], int | None]:
    """Who produced a tensor a node reads, by ONNX's scoping: its own graph first, then the
    graphs around it (an If's then_branch and else_branch often make tensors of one name:
    optimum's merged decoder holds the network twice; a then-branch node reads its own
    branch's, never the other's). The browser derives the same edges (wire.js)."""
    made: dict[tuple[str, str], int] = {}
    for n in nodes:
        for t in n.outputs:
            if t:
                made[(n.body, t)] = n.id
    owner_body = {n.name: n.body for n in nodes}

    def find(node: int, tensor: str) -> int | None:
        scope, seen = nodes[node].body, 0
        while True:
            found = made.get((scope, tensor))
            if found is not None or not scope or seen > 64:
                return found
            scope, seen = owner_body.get(scope.rsplit("/", 1)[0], ""), seen + 1

    return find
