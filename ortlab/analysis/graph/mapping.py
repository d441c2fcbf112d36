"""Map the nodes of an ORT-optimized graph back to the original graph, by tensor names.

ORT renames most nodes it rewrites (``b0_fc_matmul/MatMulAddFusion``, ``r1_nchwc``) but keeps
the names of the tensors at fusion boundaries. So:

1. optimized nodes connected by tensors that do not exist in the original graph form a *group*
   (a fusion that produced several nodes, e.g. ReorderInput → Conv → ReorderOutput);
2. walking the original graph backwards from each tensor the group produces, through tensors
   the optimized graph no longer produces, collects the original nodes the group replaced
   (stopping at tensors another optimized node produces, graph inputs and initializers);
3. original nodes no group claims were folded into constants (all inputs constant) or
   eliminated.

The mapping is many-to-many (a shared subexpression can feed two groups). It works for compiled
EP subgraphs too: a compiled partition is one "optimized node" whose inputs and outputs are
original tensor names.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ortlab.core.eps import INSERTED_CAST
from ortlab.core.graph import OpNode, graph_node_protos, graph_nodes

__all__ = ["NodeMapping", "OpNode", "UnionFind", "graph_node_protos", "graph_nodes", "map_nodes"]


KERNELS_FOR: dict[str, frozenset[str]] = {
    "Conv": frozenset(
        {
            "Conv",
            "FusedConv",
            "NhwcConv",
            "NhwcFusedConv",
            "QLinearConv",
            "ConvInteger",
            "EPContext",
        }
    ),
    "ConvTranspose": frozenset({"ConvTranspose", "QLinearConvTranspose", "EPContext"}),
    "MatMul": frozenset(
        {
            "MatMul",
            "FusedMatMul",
            "Gemm",
            "FusedGemm",
            "MatMulInteger",
            "QGemm",
            "QLinearMatMul",
            "DynamicQuantizeMatMul",
            "MatMulNBits",
            "MatMulIntegerToFloat",
            "Attention",
            "MultiHeadAttention",
            "GroupQueryAttention",
            "QAttention",
            "EPContext",
        }
    ),
    "Gemm": frozenset({"Gemm", "FusedGemm", "QGemm", "MatMul", "FusedMatMul", "EPContext"}),
}
"""Kernels (final-graph op types) that compute an original op, for the mapping's self-check.
A compiled EP subgraph (EPContext, ``*-EP-subgraph``) computes whatever it holds."""


@dataclass(frozen=True)
class Group:
    """Optimized nodes that replaced a set of original nodes."""

    optimized: list[str]
    original: list[str]
    kind: str
    """'kept' (same op), 'rewritten' (1:1, new op or domain), 'fused' (several originals or
    several optimized nodes), 'inserted' (no original: layout reorders, Memcpy)."""


@dataclass(frozen=True)
class NodeMapping:
    groups: list[Group]
    status: dict[str, str]
    """Per original node: 'kept', 'rewritten', 'fused', 'folded' (constant-folded) or
    'eliminated'."""
    original_to_optimized: dict[str, list[str]]
    optimized_to_original: dict[str, list[str]]
    unaccounted: list[str] = field(default_factory=list)
    """Original compute nodes (Conv, MatMul, Gemm…) that are not folded or eliminated yet are
    credited to no kernel able to compute them (a Conv mapped only to a ReorderOutput): a
    mapping error, checked against the final graph's own op types. Always empty when the
    mapping is right; tests assert it on real exports."""

    def fusions(self) -> list[Group]:
        return [g for g in self.groups if g.kind == "fused"]


@dataclass
class _Context:
    orig: dict[str, OpNode]
    order: list[str]
    producer_o: dict[str, OpNode]
    produced_p: set[str]
    stop: set[str]
    consumers: dict[str, int]
    branching: set[str] = field(init=False)
    """Tensors with more than one consumer (computed once: ``_split_group`` runs per group)."""
    position: dict[str, int] = field(init=False)
    """Each original node's index in ``order``."""

    def __post_init__(self) -> None:
        self.branching = {t for t, c in self.consumers.items() if c > 1}
        self.position = {name: i for i, name in enumerate(self.order)}


class UnionFind:
    """Disjoint sets of node names: ``find(x)`` is the root of ``x``'s set (paths compressed),
    ``union(a, b)`` joins two sets."""

    def __init__(self, items: Iterable[str]) -> None:
        self.parent = {x: x for x in items}

    def find(self, x: str) -> str:
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def _constants(nodes: Sequence[OpNode], initializers: set[str]) -> set[str]:
    """Original nodes whose every input is (transitively) constant."""
    const_tensors = set(initializers)
    const_nodes: set[str] = set()
    changed = True
    while changed:
        changed = False
        for n in nodes:
            if n.name in const_nodes:
                continue
            if all(not i or i in const_tensors for i in n.inputs):
                const_nodes.add(n.name)
                const_tensors.update(n.outputs)
                changed = True
    return const_nodes


def map_nodes(
    original: Sequence[OpNode],
    optimized: Sequence[OpNode],
    initializers: Iterable[str] = (),
    graph_inputs: Iterable[str] = (),
) -> NodeMapping:
    """Many-to-many mapping between original and optimized nodes (see module docstring)."""
    orig_tensors = {t for n in original for t in (*n.inputs, *n.outputs) if t}
    orig_tensors |= set(initializers) | set(graph_inputs)
    producer_o = {t: n for n in original for t in n.outputs if t}
    produced_p = {t for n in optimized for t in n.outputs if t}
    stop = set(initializers) | set(graph_inputs)

    members = _joined_by_new_tensors(optimized, orig_tensors)
    orig_by_name = {n.name: n for n in original}
    consumers: dict[str, int] = defaultdict(int)
    for n in original:
        for t in n.inputs:
            consumers[t] += 1
    ctx = _Context(
        orig_by_name, [n.name for n in original], producer_o, produced_p, stop, dict(consumers)
    )
    anchors = _anchors(optimized, orig_by_name, producer_o)
    constants = _constants(original, set(initializers))
    groups: list[Group] = []
    walls = produced_p | stop  # one union, not one per group
    for nodes in members:
        outputs = [t for n in nodes for t in n.outputs if t in orig_tensors]
        found = _walk_back(outputs, producer_o, walls, stop)
        found_set = set(found)
        producing = [n for n in nodes if any(t in orig_tensors for t in n.outputs)]
        if len(nodes) > 1 and any(anchors.get(n.name) in found_set for n in nodes):
            # Named after original nodes (NCHWc chains: `<conv output>_nchwc` kernels between
            # ReorderInput/ReorderOutput): each kernel takes its namesake, so a Conv is
            # credited to the Conv kernel, not to the reorder that ends the chain.
            split = _split_group(nodes, found, anchors, ctx)
        elif len(producing) > 1:  # e.g. two Attention nodes sharing one mask-processing node
            split = _split_by_outputs(nodes, producing, found, ctx)
        else:
            split = [Group([n.name for n in nodes], found, "")]
        by_name = {n.name: n for n in nodes}
        for g in split:  # constant inputs folded into a node do not make it a fusion
            real = [o for o in g.original if o not in constants]
            group_nodes = [by_name[o] for o in g.optimized]
            kind = "inserted" if not g.original else _kind(group_nodes, real, orig_by_name)
            groups.append(Group(g.optimized, g.original, kind))
    claimed: dict[str, list[str]] = defaultdict(list)
    opt_to_orig: dict[str, list[str]] = defaultdict(list)
    for g in groups:
        for o in g.original:
            claimed[o].extend(g.optimized)
        for name in g.optimized:
            opt_to_orig[name].extend(g.original)

    status = _statuses(groups, original, constants)
    final_ops = {n.name: n.op_type for n in optimized}
    unaccounted = [
        n.name
        for n in original
        if n.op_type in KERNELS_FOR
        and status.get(n.name) not in ("folded", "eliminated")
        and not _computes({final_ops.get(o, "") for o in claimed.get(n.name, [])}, n.op_type)
    ]
    return NodeMapping(
        groups=groups,
        status=status,
        original_to_optimized={k: list(dict.fromkeys(v)) for k, v in claimed.items()},
        optimized_to_original={k: list(dict.fromkeys(v)) for k, v in opt_to_orig.items()},
        unaccounted=unaccounted,
    )


def _computes(kernels: set[str], op: str) -> bool:
    return bool(kernels & KERNELS_FOR[op]) or any("EP-subgraph" in k for k in kernels)


def _joined_by_new_tensors(
    optimized: Sequence[OpNode], orig_tensors: set[str]
) -> list[list[OpNode]]:
    """Optimized nodes connected through tensors the original graph does not have."""
    uf = UnionFind(n.name for n in optimized)
    producer_p = {t: n.name for n in optimized for t in n.outputs if t}
    for n in optimized:
        for t in n.inputs:
            if t and t not in orig_tensors and t in producer_p:
                uf.union(producer_p[t], n.name)
    members: dict[str, list[OpNode]] = defaultdict(list)
    for n in optimized:
        members[uf.find(n.name)].append(n)
    return list(members.values())


def _statuses(
    groups: list[Group], original: Sequence[OpNode], constants: set[str]
) -> dict[str, str]:
    rank = {"kept": 0, "rewritten": 1, "fused": 2}
    status: dict[str, str] = {}
    for g in groups:
        for o in g.original:
            if o in constants:
                status[o] = "folded"
            elif g.kind in rank and rank[g.kind] >= rank.get(status.get(o, "kept"), 0):
                status[o] = g.kind
    for n in original:
        if n.name not in status:
            status[n.name] = "folded" if n.name in constants else "eliminated"
    return status


def _walk_back(
    outputs: list[str],
    producer_o: dict[str, OpNode],
    stop_tensors: set[str],
    graph_stop: set[str],
    first: OpNode | None = None,
) -> list[str]:
    """Original nodes behind ``outputs`` (or from ``first``), not crossing ``stop_tensors``,
    graph inputs or initializers (``graph_stop``)."""
    found: dict[str, None] = {}
    stack = [first] if first is not None else [producer_o[t] for t in outputs if t in producer_o]
    while stack:
        n = stack.pop()
        if n.name in found:
            continue
        found[n.name] = None
        for t in n.inputs:
            if not t or t in graph_stop or t in stop_tensors or t not in producer_o:
                continue
            stack.append(producer_o[t])
    return list(found)


_SEPARATORS = "_/ "
_ORT_PREFIXES = (INSERTED_CAST,)
"""Prefixes ORT puts before the tensor a node is named after: an fp16 Conv run in fp32 on the
CPU EP becomes ``InsertedPrecisionFreeCast_<its output tensor>_nchwc``."""


def _anchors(
    optimized: Sequence[OpNode], orig: dict[str, OpNode], producer_o: dict[str, OpNode]
) -> dict[str, str]:
    """Optimized node -> the original node its name derives from (``r2_nchwc`` <- the node
    producing ``r2``; ``/l0/MatMul/MatMulAddFusion`` <- ``/l0/MatMul``), longest match."""
    out: dict[str, str] = {}
    for n in optimized:
        if n.op_type == "Cast" and n.name.startswith(_ORT_PREFIXES):
            continue  # ORT's precision cast computes nothing of its namesake
        name = n.name.removeprefix("fused ")
        for prefix in _ORT_PREFIXES:  # fp16 on the CPU EP: the fp32 copy of a tensor
            name = name.removeprefix(prefix)
        cuts = [i for i, ch in enumerate(name) if ch in _SEPARATORS] + [len(name)]
        for i in reversed(cuts):
            prefix = name[:i]
            if prefix in orig:
                out[n.name] = prefix
                break
            if prefix in producer_o:
                out[n.name] = producer_o[prefix].name
                break
    return out


def _split_by_outputs(
    nodes: list[OpNode], producing: list[OpNode], found: list[str], ctx: _Context
) -> list[Group]:
    """Each optimized node that produces original tensors takes what lies behind them; helper
    nodes that produce only new tensors (mask processing) are 'inserted'."""
    out = []
    claimed: set[str] = set()
    for n in producing:
        outs = [t for t in n.outputs if t in ctx.producer_o]
        own = _walk_back(outs, ctx.producer_o, ctx.produced_p | ctx.stop, ctx.stop)
        claimed.update(own)
        out.append(Group([n.name], own, "fused"))
    helpers = [n.name for n in nodes if n not in producing]
    rest = [o for o in found if o not in claimed]
    if helpers or rest:
        out.append(Group(helpers or [producing[0].name], rest, "fused" if rest else "inserted"))
    return out


def _split_group(
    nodes: list[OpNode],
    found: list[str],
    anchors: dict[str, str],
    ctx: _Context,
) -> list[Group]:
    """Split a chain of optimized nodes joined by new tensors (NCHWc layouts) at their anchors.

    Each anchored node takes its anchor and the single-consumer chain behind it (Conv <- BN <-
    Relu); an original left over (a residual Sum + Relu fused into a Conv) joins the group
    that produces its input, preferring the input only it consumes (the fused chain)."""
    in_group = set(found)
    anchor_outputs = {
        t for n in nodes if n.name in anchors for t in ctx.orig[anchors[n.name]].outputs
    }
    out: list[Group] = []
    owner: dict[str, int] = {}
    stop = ctx.produced_p | anchor_outputs | ctx.branching
    for n in nodes:
        if n.name not in anchors or anchors[n.name] not in in_group:
            continue
        start = ctx.orig[anchors[n.name]]
        own = [
            o
            for o in _walk_back([], ctx.producer_o, stop, ctx.stop, first=start)
            if o in in_group and o not in owner
        ]
        for o in own:
            owner[o] = len(out)
        out.append(Group([n.name], own, "fused"))
    _claim_by_output(nodes, in_group, out, owner, ctx)
    # topological: a fused Sum is placed before the Relu after it
    for name in sorted((n for n in in_group if n in ctx.position), key=ctx.position.__getitem__):
        if name in owner:
            continue
        inputs = [t for t in ctx.orig[name].inputs if t in ctx.producer_o]
        inputs.sort(key=lambda t: ctx.consumers.get(t, 0))  # the fused chain's tensor first
        for t in inputs:
            src = ctx.producer_o[t].name
            if src in owner:
                owner[name] = owner[src]
                out[owner[src]].original.append(name)
                break
    rest_nodes = [n.name for n in nodes if not any(n.name in g.optimized for g in out)]
    rest = [o for o in found if o not in owner]
    if rest_nodes or rest:
        owners = rest_nodes or [n.name for n in nodes]
        out.append(Group(owners, rest, "fused" if rest else "inserted"))
    return out


def _claim_by_output(
    nodes: list[OpNode],
    in_group: set[str],
    out: list[Group],
    owner: dict[str, int],
    ctx: _Context,
) -> None:
    """An original left over whose output an unanchored kernel produces is computed by that
    kernel and the unanchored chain behind it (an fp16 Softmax decomposed into ReduceMax →
    Sub → Exp → ReduceSum → Div → Cast): they take it, not the node before it."""
    taken = {o for g in out for o in g.optimized}
    free = {n.name: n for n in nodes if n.name not in taken}
    made_by = {t: n for n in free.values() for t in n.outputs if t}
    for name in sorted((n for n in in_group if n in ctx.position), key=ctx.position.__getitem__):
        if name in owner:
            continue
        last = next((made_by[t] for t in ctx.orig[name].outputs if t in made_by), None)
        if last is None or last.name not in free:
            continue
        chain, stack = [], [last]
        while stack:
            k = stack.pop()
            if k.name not in free:
                continue
            chain.append(k.name)
            del free[k.name]
            stack += [made_by[t] for t in k.inputs if t in made_by and made_by[t].name in free]
        owner[name] = len(out)
        out.append(Group(chain[::-1], [name], "fused"))


def _kind(nodes: list[OpNode], found: list[str], orig: dict[str, OpNode]) -> str:
    if not found:
        return "kept" if len(nodes) == 1 else "fused"  # only constants behind it
    if len(nodes) == 1 and len(found) == 1:
        o = orig.get(found[0])
        n = nodes[0]
        if o is not None and o.op_type == n.op_type and o.domain == n.domain:
            return "kept"
        return "rewritten"  # one node for one node, new op or domain (NCHWc Conv, Gemm)
    return "fused"
