"""The graph's first picture: which groups open, and the blocks a flat graph is cut into.

A flat-scoped export (Paddle, tf2onnx, old PyTorch) has no name scopes to group by, so its
nodes are cut into blocks of a readable size at the narrow points of the graph, each named
after the ops that do its work (the most measured time, else the most FLOPs at the run's or the
guessed input shapes, else compute before element-wise before data movement), runs of pure data
movement merged, repeats found by structure. Then scope
levels open from the top while the picture keeps to COLLAPSE_ABOVE items.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ortlab.analysis.graph.elements import GraphGroup

__all__ = ["COLLAPSE_ABOVE", "BlockNode", "chunk_siblings", "initial_expanded", "regroup"]

COLLAPSE_ABOVE = 60
"""Graphs with more nodes start with scope groups collapsed, opened level by level while at
most this many items are visible: a 2,000-node graph fitted flat is an unreadable line."""


class BlockNode(Protocol):
    """What the block cutter reads of a node (a :class:`~ortlab.analysis.graph.data.GraphNode`
    or the lighter record ``graph_data`` cuts before it builds them)."""

    @property
    def name(self) -> str: ...
    @property
    def op_type(self) -> str: ...
    @property
    def group(self) -> str: ...
    @property
    def us_per_run(self) -> float: ...
    @property
    def inputs(self) -> Sequence[str]: ...
    @property
    def outputs(self) -> Sequence[str]: ...


def initial_expanded(groups: list[GraphGroup], total: int, extra: int = 0) -> list[str]:
    """The groups open in the first picture, which draws at most COLLAPSE_ABOVE items (``extra``
    of them, the graph's inputs and outputs, are always drawn). Scope levels open from the top
    while the picture stays within that; then a group still closed that holds more than a
    quarter of the model (one giant box is no picture) opens, biggest first, while the picture
    stays within it."""
    budget = COLLAPSE_ABOVE - extra
    if total <= budget:
        return [g.id for g in groups]
    expanded: list[str] = []
    for depth in range(1, 1 + max((g.depth for g in groups), default=0)):
        level = [g for g in groups if g.depth == depth]
        candidate = expanded + [g.id for g in level]
        if _visible_count(groups, set(candidate), total) > budget:
            break
        expanded = candidate
    opened = set(expanded)
    while True:
        closed = [
            g
            for g in groups  # a big group drawn closed now
            if g.id not in opened and (g.depth == 1 or g.parent in opened) and g.size > total / 4
        ]
        fits = (
            g
            for g in sorted(closed, key=lambda g: -g.size)
            if _visible_count(groups, opened | {g.id}, total) <= budget
        )
        grown = next(fits, None)
        if grown is None:
            return expanded
        opened.add(grown.id)
        expanded.append(grown.id)


def _visible_count(groups: list[GraphGroup], expanded: set[str], total: int) -> int:
    hidden = 0
    shown_collapsed = 0
    for g in groups:
        parent_open = g.depth == 1 or g.parent in expanded
        if parent_open and g.id not in expanded:
            hidden += g.size
            shown_collapsed += 1
    return total - hidden + shown_collapsed


def _live_counts(nodes: list[BlockNode], ignore: set[str]) -> list[int]:
    """live[i]: tensors produced at or before position i and read after it, not counting
    ``ignore`` (broadcast tensors, which are live everywhere and would forbid every cut)."""
    n = len(nodes)
    born = {t: k for k, node in enumerate(nodes) for t in node.outputs if t and t not in ignore}
    last = dict.fromkeys(born, -1)
    for k, node in enumerate(nodes):
        for t in node.inputs:
            if t in last:
                last[t] = max(last[t], k)
    delta = [0] * (n + 1)
    for t, k in born.items():
        if last[t] > k:
            delta[k] += 1
            delta[last[t]] -= 1
    live, running = [], 0
    for k in range(n):
        running += delta[k]
        live.append(running)
    return live


def _segments(live: list[int], target: int) -> list[range]:
    """Cut positions 0..n-1 into segments of about ``target`` (between target/2 and twice target)
    where the fewest tensors are live: between blocks, not inside one."""
    n, out, start = len(live), [], 0
    while n - start > 2 * target:
        lo, hi = start + max(target // 2, 1) - 1, min(start + 2 * target, n) - 1
        best = min(range(lo, hi + 1), key=lambda k: (live[k], abs(k - (start + target - 1))))
        out.append(range(start, best + 1))
        start = best + 1
    if start < n:
        out.append(range(start, n))
    return out


_COMPUTE_OPS = frozenset(
    {
        "Conv",
        "ConvTranspose",
        "ConvInteger",
        "QLinearConv",
        "Gemm",
        "MatMul",
        "MatMulInteger",
        "QLinearMatMul",
        "MatMulNBits",
        "DynamicQuantizeMatMul",
        "FusedConv",
        "FusedGemm",
        "FusedMatMul",
        "Attention",
        "MultiHeadAttention",
        "GroupQueryAttention",
        "LSTM",
        "GRU",
        "RNN",
        "DynamicQuantizeLSTM",
        "Einsum",
        "TreeEnsembleClassifier",
        "TreeEnsembleRegressor",
        "TreeEnsemble",
        "Scan",
        "Loop",
        "If",
        "STFT",
        "DFT",
    }
)
"""Ops whose work grows with their weights or both operands: what a block is named after."""
_DATA_MOVEMENT_OPS = frozenset(
    {
        "Identity",
        "Cast",
        "Shape",
        "Size",
        "Reshape",
        "Flatten",
        "Squeeze",
        "Unsqueeze",
        "Constant",
        "ConstantOfShape",
        "Range",
        "Gather",
        "Slice",
        "Concat",
        "Split",
        "Expand",
        "Transpose",
        "Equal",
        "Where",
        "Not",
        "And",
        "Or",
        "Less",
        "Greater",
        "NonZero",
        "Tile",
    }
)
"""Ops that compute nothing a person looks for (shapes, casts, copies): named last."""


def _structure(nodes: list[BlockNode]) -> tuple[tuple[str, int], ...]:
    """What a block is made of (every op type and how many): equal structures repeat."""
    return tuple(sorted(Counter(n.op_type for n in nodes).items()))


def _block_name(nodes: list[BlockNode], flops: Mapping[str, float] | None = None) -> str:
    """A block's name: the ops that do its work, heaviest first, by measured time when the
    nodes have one, else by FLOPs (``flops``, per node name; see
    :func:`ortlab.analysis.graph.inferred.flops_at`) when every compute op in it could be counted,
    else by class: compute ops (Conv, MatMul, …) before
    element-wise ones before data movement (Cast, Reshape, …), most frequent first within a
    class; data movement names a block only when it holds nothing else ("data movement: Cast
    x4", with a multiplication sign)."""
    count = Counter(n.op_type for n in nodes)
    timed: defaultdict[str, float] = defaultdict(float)
    work: defaultdict[str, float] = defaultdict(float)
    uncounted = set()  # compute ops ONNX inference could not size (shape after a Reshape…)
    for n in nodes:
        timed[n.op_type] += n.us_per_run
        f = (flops or {}).get(n.name, math.nan)
        work[n.op_type] += 0.0 if math.isnan(f) else f
        if math.isnan(f) and n.op_type in _COMPUTE_OPS:
            uncounted.add(n.op_type)

    def weight(op: str) -> tuple[int, int, str]:
        rank = 0 if op in _COMPUTE_OPS else 2 if op in _DATA_MOVEMENT_OPS else 1
        return rank, -count[op], op

    if any(timed.values()):
        ranked = sorted(count, key=lambda op: (-timed[op], -count[op], op))
        ranked = [op for op in ranked if timed[op] > 0] or ranked
    elif any(work.values()) and not uncounted:  # ops without a figure after, by class
        ranked = sorted(count, key=lambda op: (-work[op], *weight(op)))
    else:
        ranked = sorted(count, key=weight)
    heavy = [op for op in ranked[:2] if op not in _DATA_MOVEMENT_OPS]
    if not heavy:
        return "data movement: " + " + ".join(
            f"{op} ×{count[op]}" if count[op] > 1 else op for op in ranked[:2]
        )
    rest = len(nodes) - sum(count[op] for op in heavy)
    return " + ".join(f"{op} ×{count[op]}" if count[op] > 1 else op for op in heavy) + (
        f" (+{rest} more)" if rest else ""
    )


def _blocks(
    nodes: list[BlockNode],
    ignore: set[str],
    prefix: str = "",
    flops: Mapping[str, float] | None = None,
) -> list[str]:
    """Group paths (relative) for nodes in topological order without usable name scopes:
    segments of at most ~1/12 of the nodes cut where one tensor (or fewest) is live, named
    by the ops doing their work (:func:`_block_name`), with repeats of one structure noted
    ("block 07, like block 03"); a segment that still holds more than COLLAPSE_ABOVE nodes is
    cut again."""
    target = max(6, -(-len(nodes) // 24))
    segs: list[range] = []
    moved = False  # the last segment holds data movement only: such runs become one
    for seg in _segments(_live_counts(nodes, ignore), target):
        moving = all(nodes[i].op_type in _DATA_MOVEMENT_OPS for i in seg)
        if moving and moved and seg.stop - segs[-1].start <= COLLAPSE_ABOVE:
            segs[-1] = range(segs[-1].start, seg.stop)
        else:
            segs.append(seg)
        moved = moving
    width = len(str(len(segs)))
    seen: dict[str, str] = {}  # a block's structure -> the first block made of it
    out = [""] * len(nodes)
    for k, seg in enumerate(segs, 1):
        members = [nodes[i] for i in seg]
        num = f"{prefix}{k:0{width}d}"
        first = seen.setdefault(repr(_structure(members)), num)
        like = f", like block {first}" if first != num else ""
        path = "/" + f"block {num}{like}: {_block_name(members, flops)}".replace("/", "∕")
        inner = [""] * len(members)
        if len(members) > COLLAPSE_ABOVE:
            inner = _blocks(members, ignore, prefix=f"{num}.", flops=flops)
        for i, sub in zip(seg, inner, strict=True):
            out[i] = path + sub
    return out


def chunk_siblings(groups: list[str]) -> list[str]:
    """Each node's group (``groups``, in node order) once a container with more than
    COLLAPSE_ABOVE child groups (200 ``layer.N`` scopes of one encoder) gets a level of runs
    between them: "layer.0 … layer.8 (9 groups)"."""
    children: dict[str, dict[str, None]] = defaultdict(dict)  # ordered sets
    seen: set[str] = set()
    for group in groups:
        path = group
        while path and path not in seen:
            seen.add(path)
            parent = path.rsplit("/", 1)[0]
            children[parent][path] = None
            path = parent
    remap: dict[str, str] = {}
    for container, kid_set in children.items():
        kids = list(kid_set)
        if len(kids) <= COLLAPSE_ABOVE:
            continue
        size = -(-len(kids) // 24)
        for k in range(0, len(kids), size):
            run = kids[k : k + size]
            first, last = (c.rsplit("/", 1)[1] for c in (run[0], run[-1]))
            name = f"{first} … {last} ({len(run)} groups)".replace("/", "∕")
            for c in run:
                remap[c] = f"{container}/{name}/{c.rsplit('/', 1)[1]}"
    if not remap:
        return groups
    out = []
    for group in groups:
        path, rest = group, ""
        while path and path not in remap:  # the innermost remapped ancestor wins
            path, tail = path.rsplit("/", 1)
            rest = f"/{tail}{rest}"
        out.append(remap[path] + rest if path else group)
    return out


def regroup(
    nodes: Sequence[BlockNode], ignore: set[str], flops: Mapping[str, float] | None = None
) -> list[str]:
    """Each node's group, in node order, once every container (the root, a scope, an If/Loop
    body) whose own nodes are more than COLLAPSE_ABOVE items is cut into blocks, so no picture
    shows a flat wall of nodes: exports without name scopes (Paddle ``p2o.*``, tf2onnx) and
    huge single scopes alike. Blocks are named by measured time, else by ``flops``
    (:func:`ortlab.analysis.graph.inferred.flops_at`)."""
    own: dict[str, list[int]] = defaultdict(list)
    for k, n in enumerate(nodes):
        own[n.group].append(k)
    out = [n.group for n in nodes]
    for container, members in own.items():
        if len(members) <= COLLAPSE_ABOVE:
            continue
        paths = _blocks([nodes[k] for k in members], ignore, flops=flops)
        for k, path in zip(members, paths, strict=True):
            out[k] = container + path
    return out
