"""What the graph says about its symbolic dims (issue 47 item 2; the guesses that use it:
:mod:`ortlab.engine.fitdims`, which calls these in the worker: they import onnxruntime).

- :func:`merged_symbols`: ORT's symbolic shape inference (``onnxruntime.tools
  .symbolic_shape_infer``, auto-merge) unifies two symbols where the graph broadcasts one
  against the other (a UNet's ``[steps]`` timestep added to ``[batch, C, H, W]``).
- :func:`footprint_at`: at given values the same inference gives every tensor's shape, whose
  bytes say the least a run needs (the weights, and the largest node's inputs and outputs).

The inference runs on a copy of the graph without weight bytes and writes nothing (ORT's own
``infer_shapes`` saves a file into the working directory when it cannot finish: its loop is
run here instead)."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

import onnx

from ortlab.core.onnx_util import DTYPE_BYTES, dtype_name
from ortlab.engine.replies import Footprint

__all__ = ["footprint_at", "merged_symbols", "skeleton"]

MAX_NODES = 20_000
"""Graphs larger than this are not inferred (seconds of Python); their guesses stand."""


def skeleton(src: onnx.ModelProto) -> onnx.ModelProto:
    """The model without weight bytes (dims kept: inference reads shapes; the small tensors a
    Reshape or Slice reads as values kept whole), built without copying the weights."""
    proto = onnx.ModelProto(ir_version=src.ir_version)
    proto.opset_import.extend(src.opset_import)
    g = proto.graph
    g.name = src.graph.name
    g.node.extend(src.graph.node)
    g.input.extend(src.graph.input)
    g.output.extend(src.graph.output)
    g.value_info.extend(src.graph.value_info)
    for t in src.graph.initializer:
        if math.prod(t.dims) <= 64 and t.data_location != onnx.TensorProto.EXTERNAL:
            g.initializer.append(t)
        else:
            g.initializer.append(onnx.TensorProto(name=t.name, dims=t.dims, data_type=t.data_type))
    return proto


def _infer(proto: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, str]] | None:
    """ORT's symbolic shape inference with auto-merge: (the inferred model, its merges
    {symbol: the symbol it became}); None where it fails."""
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
    except ImportError:  # pragma: no cover - onnxruntime ships it
        return None
    quiet = logging.getLogger("onnxruntime.tools.symbolic_shape_infer")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    stripped = frozenset(t.name for t in proto.graph.initializer if not _has_data(t))

    class Skeletal(SymbolicShapeInference):  # type: ignore[misc]
        """Reads no value of a weight skeleton stripped (an elementwise op over two weights,
        which the TorchScript exporter leaves unfolded, asks every input's value)."""

        def _try_get_value(self, node: onnx.NodeProto, idx: int) -> object:
            if idx < len(node.input) and node.input[idx] in stripped:
                return None
            return super()._try_get_value(node, idx)

    try:
        s = Skeletal(2**31 - 1, True, False, 0)
        s._preprocess(proto)  # infer_shapes' loop, without the file it saves on failure
        for _ in range(8):
            if not s.run_:
                break
            s._infer_impl()
        s._update_output_from_vi()
        merges = {str(k): str(v) for k, v in getattr(s, "suggested_merge_", {}).items()}
        return s.out_mp_, merges
    except Exception:  # noqa: BLE001 - an op it cannot infer: no usage, no estimate
        return None
    finally:
        quiet.setLevel(level)


def _has_data(t: onnx.TensorProto) -> bool:
    """Whether ``t`` holds its values (skeleton keeps dims alone for the others)."""
    return (
        math.prod(t.dims) == 0
        or any(len(getattr(t, f)) for f in ("raw_data", "float_data", "int32_data", "int64_data"))
        or any(len(getattr(t, f)) for f in ("double_data", "uint64_data", "string_data"))
    )


def merged_symbols(proto: onnx.ModelProto) -> dict[str, str]:
    """{input symbol: the input symbol it is broadcast against}, where the graph unifies two
    (``{'steps': 'batch'}``, either way round); {} where inference cannot tell. Imports
    onnxruntime: the worker calls it (engine.tasks_dims)."""
    if len(proto.graph.node) > MAX_NODES:
        return {}
    symbols = {
        d.dim_param
        for v in proto.graph.input
        for d in v.type.tensor_type.shape.dim
        if d.HasField("dim_param")
    }
    got = _infer(skeleton(proto))
    if got is None:
        return {}
    merges = got[1]
    out = {}
    for a in symbols:
        b = merges.get(a)
        seen = {a}
        while b is not None and b in merges and b not in seen:  # follow a chain of merges
            seen.add(b)
            b = merges[b]
        if b is not None and b != a:
            out[a] = b
    for a, b in list(out.items()):  # symbols merged into a third one: each other's
        if b not in symbols:
            partner = next((x for x, y in out.items() if y == b and x != a), None)
            if partner is not None:
                out[a] = partner
            else:
                del out[a]
    return out


def footprint_at(src: onnx.ModelProto, values: Mapping[str, int]) -> Footprint | None:
    """Every tensor's bytes with the inputs' symbols at ``values``; None where inference cannot
    give the shapes. Imports onnxruntime: the worker calls it (engine.tasks_dims)."""
    if len(src.graph.node) > MAX_NODES:
        return None
    proto = skeleton(src)
    for v in proto.graph.input:
        for d in v.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in values:
                d.dim_value = int(values[d.dim_param])
    got = _infer(proto)
    if got is None:
        return None
    inferred = got[0].graph
    sizes: dict[str, int] = {}
    for v in [*inferred.input, *inferred.value_info, *inferred.output]:
        tt = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        if tt.HasField("shape") and all(x >= 0 for x in dims):
            size = DTYPE_BYTES.get(dtype_name(tt.elem_type), 4.0)
            sizes[v.name] = int(math.prod(dims) * size)
    if not sizes:
        return None
    weights = sum(
        int(math.prod(t.dims) * DTYPE_BYTES.get(dtype_name(t.data_type), 4.0))
        for t in src.graph.initializer
    )
    node_bytes = [sum(sizes.get(x, 0) for x in [*n.input, *n.output]) for n in inferred.node] or [0]
    largest = max(sizes, key=sizes.__getitem__)
    return Footprint(largest, sizes[largest], weights + max(node_bytes))
