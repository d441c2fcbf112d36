"""What a decoder's weights say of it: how they are stored (int4 MatMulNBits, fp16, …), the
query heads and head size where no config says them, and its experts (a mixture of experts'
top-k of n).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import onnx

from ortlab.core.carried import KVPair
from ortlab.core.onnx_util import DTYPE_BYTES, dtype_name, subgraphs, walk_nodes

__all__ = [
    "Experts",
    "WeightFormat",
    "experts",
    "head_size_from_weights",
    "heads_from_projections",
    "weight_format",
    "weights_dtype",
]


@dataclass(frozen=True)
class WeightFormat:
    """How a decoder's weights are stored: ``kind`` ('int4', 'int8', 'fp32', 'fp16', 'bf16'),
    the op that holds them quantized ('MatMulNBits', 'MatMul'; '' for float weights), its
    bits, block size and accuracy level where it says them."""

    kind: str
    op: str
    bits: int
    block: int | None = None
    accuracy_level: int | None = None

    @property
    def quantized(self) -> bool:
        """Stored as integers (an int4 or int8 op holds them)."""
        return bool(self.op)

    def label(self) -> str:
        """As a person names it: 'int4 MatMulNBits (block 32, accuracy level 4)', 'int8
        MatMul', 'fp32 weights'."""
        if not self.op:
            return f"{self.kind} weights"
        extra = ", ".join(
            x
            for x in (
                f"block {self.block}" if self.block else "",
                f"accuracy level {self.accuracy_level}" if self.accuracy_level is not None else "",
            )
            if x
        )
        return f"{self.kind} {self.op}" + (f" ({extra})" if extra else "")


class Experts(NamedTuple):
    """A mixture of experts as its ops say it."""

    k: int
    """Experts each token runs (the op's ``k``: top-k)."""
    n: int
    """Experts in all (the leading dim of its first weight)."""
    layers: int
    """The routing nodes: one per layer that has experts."""
    op: str
    """'MoE' or 'QMoE'."""


def experts(graph: onnx.GraphProto) -> Experts | None:
    """The graph's mixture of experts, read from its MoE or QMoE nodes (None without)."""
    found = [n for n, _ in walk_nodes(graph) if n.op_type in ("MoE", "QMoE")]
    if not found:
        return None
    node = found[0]
    k = next((int(a.i) for a in node.attribute if a.name == "k"), 1)
    weight = node.input[2] if len(node.input) > 2 else ""
    dims = next((list(t.dims) for t in graph.initializer if t.name == weight), [])
    return Experts(k, int(dims[0]) if dims else 0, len(found), node.op_type)


def head_size_from_weights(graph: onnx.GraphProto, heads: int | None) -> int | None:
    """hidden / heads, the hidden size read from the embedding table's second dim."""
    if not heads:
        return None
    for t in graph.initializer:
        if len(t.dims) == 2 and t.dims[0] > t.dims[1] and t.dims[1] % heads == 0:
            return int(t.dims[1]) // heads
    return None


def heads_from_projections(
    graph: onnx.GraphProto, pair: KVPair, kv_heads: int, head_size: int
) -> int | None:
    """Query heads from the weights, where no config says them: the key projection is the
    first weight multiplication upstream of the first layer's present key; the query
    projection reads the same activation beside it, and its output width over the head size
    is the heads (a fused QKV projection: its width less the key and value heads')."""
    inits = {t.name: t for t in graph.initializer}
    producer = {t: n for n in graph.node for t in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for t in n.input:
            consumers.setdefault(t, []).append(n)
    seen: set[str] = set()
    todo = [pair.present_key]
    key_proj = None
    while todo and key_proj is None:
        node = producer.get(todo.pop(0))
        if node is None or node.name in seen:
            continue
        seen.add(node.name)
        if out_width(node, inits) is not None:
            key_proj = node
        else:
            todo += [t for t in node.input if t in producer]
    if key_proj is None:
        return None
    x = next((t for t in key_proj.input if t not in inits), None)
    widths = [w for n in consumers.get(x or "", []) if (w := out_width(n, inits)) is not None]
    fused = len(widths) == 1  # one projection makes query, key and value
    heads = widths[0] // head_size - 2 * kv_heads if fused else max(widths) // head_size
    return heads if heads >= kv_heads and heads % kv_heads == 0 else None


def out_width(node: onnx.NodeProto, inits: Mapping[str, onnx.TensorProto]) -> int | None:
    """The output features of a weight multiplication (None for any other node)."""
    if node.op_type == "MatMulNBits":
        return next((int(a.i) for a in node.attribute if a.name == "N"), None)
    if node.op_type not in ("MatMul", "Gemm") or len(node.input) < 2:
        return None
    w = inits.get(node.input[1])
    if w is None or len(w.dims) != 2:
        return None
    trans_b = any(a.name == "transB" and a.i for a in node.attribute)
    return int(w.dims[0] if trans_b else w.dims[1])


def weight_format(graph: onnx.GraphProto, kv_dtype: str) -> WeightFormat:
    """How the weights are stored: the first MatMulNBits' bits, block and accuracy level; an
    int8 MatMul op; else the cache's float type (the weights'; no quantized op holds them)."""
    for node, _ in walk_nodes(graph):
        if node.op_type == "MatMulNBits":
            attrs = {a.name: int(a.i) for a in node.attribute}
            bits = attrs.get("bits", 4)
            return WeightFormat(
                f"int{bits}",
                "MatMulNBits",
                bits,
                attrs.get("block_size"),
                attrs.get("accuracy_level"),
            )
    ops = {n.op_type for n, _ in walk_nodes(graph)}
    if ops & {"MatMulInteger", "DynamicQuantizeMatMul", "QLinearMatMul", "MatMulIntegerToFloat"}:
        return WeightFormat("int8", "MatMul", 8)
    held = weights_dtype(graph) or kv_dtype
    kind = {"float": "fp32", "float16": "fp16", "bfloat16": "bf16"}.get(held, held)
    return WeightFormat(kind, "", 8 * int(DTYPE_BYTES.get(held, 4.0)))


def weights_dtype(graph: onnx.GraphProto) -> str | None:
    """The float type holding most of the weights' bytes (the initializers', bodies
    included), None without float weights: an fp16 conversion that keeps fp32 inputs and
    outputs (``keep_io_types``, as ortlab.to_fp16 and onnxconverter's converter do) has an
    fp32 cache but fp16 weights."""
    by_type: dict[str, int] = {}
    graphs = [graph, *(g for n, _ in walk_nodes(graph) for g in subgraphs(n))]
    for g in graphs:
        for t in g.initializer:
            name = dtype_name(t.data_type)
            if name in ("float", "float16", "bfloat16"):
                by_type[name] = by_type.get(name, 0) + math.prod(t.dims) * int(DTYPE_BYTES[name])
    return max(by_type, key=lambda k: by_type[k]) if by_type else None
