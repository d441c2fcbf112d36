"""Small helpers over onnx protos shared by the core modules (no ORT, no UI)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import onnx
from onnx import TensorProto, helper

# ORT's standard domains, with their usual aliases; anything else needs a custom-op library.
STANDARD_DOMAINS = frozenset(
    {
        "",
        "ai.onnx",
        "ai.onnx.ml",
        "ai.onnx.training",
        "ai.onnx.preview.training",
        "com.microsoft",
        "com.microsoft.nchwc",
        "com.microsoft.experimental",
        "com.ms.internal.nhwc",
        "com.microsoft.dml",
    }
)

_SUB_BYTE_BITS: dict[int, int] = {
    TensorProto.INT4: 4,
    TensorProto.UINT4: 4,
}
for _name, _bits in (("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2)):
    if hasattr(TensorProto, _name):
        _SUB_BYTE_BITS[getattr(TensorProto, _name)] = _bits


def dtype_name(elem_type: int) -> str:
    """ONNX element type as ORT writes it in profiles: 'float', 'int64', 'float16'…"""
    if elem_type == TensorProto.UNDEFINED:
        return "undefined"
    try:
        return str(TensorProto.DataType.Name(elem_type)).lower()
    except ValueError:
        return f"type{elem_type}"


def elem_bits(elem_type: int) -> int:
    """Bits per element (8 for bool; 0 for strings, whose size is data-dependent)."""
    if elem_type in _SUB_BYTE_BITS:
        return _SUB_BYTE_BITS[elem_type]
    if elem_type == TensorProto.STRING:
        return 0
    try:
        return int(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).itemsize) * 8
    except (KeyError, TypeError, ValueError):
        return 0


def tensor_nbytes(tensor: TensorProto) -> int:
    """Bytes of an initializer's data, without loading external data."""
    if tensor.data_location == TensorProto.EXTERNAL:
        info = {e.key: e.value for e in tensor.external_data}
        if "length" in info:
            return int(info["length"])
    elif tensor.raw_data:
        return len(tensor.raw_data)
    elif tensor.data_type == TensorProto.STRING:
        return sum(len(s) for s in tensor.string_data)
    count = math.prod(tensor.dims)
    return (count * elem_bits(tensor.data_type) + 7) // 8


def value_info_shape(vi: onnx.ValueInfoProto) -> tuple[int | str | None, ...] | None:
    """Shape of a tensor value: ints for fixed dims, names for symbolic ones, None if unknown."""
    ttype = vi.type.tensor_type
    if not ttype.HasField("shape"):
        return None
    dims: list[int | str | None] = []
    for d in ttype.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return tuple(dims)


def value_info_kind(vi: onnx.ValueInfoProto) -> str:
    return str(vi.type.WhichOneof("value")) if vi.type.WhichOneof("value") else "undefined"


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def walk_nodes(graph: onnx.GraphProto, depth: int = 0) -> Iterator[tuple[onnx.NodeProto, int]]:
    """Every node of the graph and of its control-flow subgraphs (If/Loop/Scan), with depth."""
    for node in graph.node:
        yield node, depth
        for sub in subgraphs(node):
            yield from walk_nodes(sub, depth + 1)


def walk_initializers(graph: onnx.GraphProto) -> Iterator[TensorProto]:
    yield from graph.initializer
    for node in graph.node:
        for sub in subgraphs(node):
            yield from walk_initializers(sub)
