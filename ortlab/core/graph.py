"""Walking an ONNX graph as ortlab names its nodes: main graph and If/Loop/Scan bodies, unnamed
nodes given stable names. The join, the graph view and the worker's final-graph reader all use
these names, so they agree on every node."""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from ortlab.core.onnx_util import bodies, ort_node_name

__all__ = ["OpNode", "graph_node_protos", "graph_nodes"]


@dataclass(frozen=True)
class OpNode:
    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    parent: str = ""
    """For a node inside an If/Loop/Scan body: ``<control-flow node>/<attribute>``; else ''."""


def graph_nodes(graph: onnx.GraphProto, subgraphs: bool = False) -> list[OpNode]:
    """The main graph's nodes (with ``subgraphs``, If/Loop/Scan bodies too, after their
    owner); an unnamed node gets ORT's name for it, ``<op_type>_<index in its graph>``, and a
    name met again (in another body, or repeated) gets ``#k`` so names stay unique
    (:func:`ortlab.analysis.graph.scopes.raw_name` removes it)."""
    return [n for n, _ in graph_node_protos(graph, subgraphs)]


def graph_node_protos(
    graph: onnx.GraphProto, subgraphs: bool = False
) -> list[tuple[OpNode, onnx.NodeProto]]:
    """:func:`graph_nodes` with each node's NodeProto (its attributes)."""
    out: list[tuple[OpNode, onnx.NodeProto]] = []
    _collect(graph, "", out, {}, subgraphs)
    return out


def _collect(
    graph: onnx.GraphProto,
    parent: str,
    out: list[tuple[OpNode, onnx.NodeProto]],
    seen: dict[str, int],
    deep: bool,
) -> None:
    for i, n in enumerate(graph.node):
        name = ort_node_name(n, i)  # ORT's own rule, bodies too: the profile's names
        if name in seen:  # duplicate names exist in the wild: keep them distinct
            seen[name] += 1
            name = f"{name}#{seen[name]}"
        else:
            seen[name] = 0
        op = OpNode(name, n.op_type, n.domain, tuple(n.input), tuple(n.output), parent)
        out.append((op, n))
        if not deep:
            continue
        for tag, body in bodies(n):
            _collect(body, f"{name}/{tag}", out, seen, deep)
