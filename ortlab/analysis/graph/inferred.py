"""What the graph view knows of a model's tensors from ONNX shape inference: each tensor's
'dtype[shape]', and each node's FLOPs at some input shapes (what names a block when nothing
was measured).

Neither depends on the call, only on the model and the input shapes, and on a 10,000-node
graph each is a shape inference and a pass over every tensor or node (~0.1-0.2 s): so each is
worked out once per loaded model, and once per model *file* for the last few files (by its
fingerprint: path, size, mtime; a file ortlab wrote for bytes or a proto by its content's
digest), so a new ``ortlab.load`` of the same file (``ortlab.graph(path)`` again, a notebook
cell re-run) reuses them too.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from ortlab.analysis.limits.formulas import Tensor, node_cost
from ortlab.core import cache
from ortlab.core.onnx_util import attr_values, dtype_name, inferred_graph, value_info_shape
from ortlab.engine.trace import types_text

if TYPE_CHECKING:
    import onnx

    from ortlab.analysis.graph.elements import GraphNode
    from ortlab.analysis.placement.result import PlacementResult
    from ortlab.core.model import Model

__all__ = ["flops_at", "run_types", "shape_key", "tensor_types", "types_at"]

FILES_KEPT = 8
"""Results kept by model file (beyond the loaded models, which keep their own while alive)."""

_T = TypeVar("_T")
ShapeKey: TypeAlias = tuple[tuple[str, tuple[int, ...]], ...]
"""Input shapes as a cache key: (input name, shape) pairs, sorted."""
_BY_MODEL: weakref.WeakKeyDictionary[Model, dict[tuple[Any, ...], Any]] = (
    weakref.WeakKeyDictionary()
)
_BY_FILE: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
_LOCK = threading.Lock()


def _cached(m: Model, key: tuple[Hashable, ...], make: Callable[[], _T]) -> _T:
    """``make()`` once per loaded model and ``key``, and once per model file and ``key`` for
    the last FILES_KEPT (a model's proto is never changed: sessions run its file)."""
    with _LOCK:
        own = _BY_MODEL.setdefault(m, {})
        if key in own:
            return own[key]  # type: ignore[no-any-return]
    file = _file(m)
    file_key = None if file is None else (file, *key)
    with _LOCK:
        found = file_key is not None and file_key in _BY_FILE
        if file_key is not None and found:
            _BY_FILE.move_to_end(file_key)
            value = _BY_FILE[file_key]
    if not found:
        value = make()
    with _LOCK:
        own[key] = value
        if file_key is not None and not found:
            _BY_FILE[file_key] = value
            while len(_BY_FILE) > FILES_KEPT:
                _BY_FILE.popitem(last=False)
    return value  # type: ignore[no-any-return]


def _file(m: Model) -> str | None:
    """The model file's identity: its path for a file ortlab wrote for bytes or a proto (named
    by its content's digest, and touched whenever it is loaded again), else its fingerprint
    (path, size, mtime); None when the file is gone (a cleared cache)."""
    if cache.is_content_path(m.path):
        return str(m.path)
    try:
        return m.fingerprint()
    except OSError:
        return None


def shape_key(input_shapes: Mapping[str, Sequence[int]] | None) -> ShapeKey:
    """Input shapes as a cache key (() for none: the declared ones)."""
    return tuple(sorted((k, tuple(v)) for k, v in (input_shapes or {}).items()))


def tensor_types(
    m: Model, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> dict[str, str]:
    """Tensor name -> 'dtype[shape]' (ONNX shape inference; weights marked '(initializer)'),
    worked out once per model and input shapes. With ``input_shapes`` (a run's), the
    tensors inference can follow at those inputs are concrete; the others keep their declared
    type."""
    return {**types_at(m, ()), **(types_at(m, shape_key(input_shapes)) if input_shapes else {})}


def types_at(m: Model, key: ShapeKey) -> dict[str, str]:
    """The declared types (``key`` empty), or only the concrete ones at those input shapes
    (``key`` from :func:`shape_key`): cached. Callers copy before changing it."""
    return _cached(m, ("types", *key), lambda: _tensor_types(m.proto, dict(key) or None))


def _tensor_types(
    model: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> dict[str, str]:
    """dtype[shape] of every tensor ONNX shape inference can type (weights not needed); at
    ``input_shapes``, only the tensors it gives a concrete shape."""
    out = {}
    names: dict[int, str] = {}  # element type -> its name
    graph = inferred_graph(model, input_shapes)
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        shape = value_info_shape(vi)
        if input_shapes and (shape is None or not all(isinstance(d, int) for d in shape)):
            continue  # not followed at the run's shapes: the declared type stays
        dims = (
            "?"
            if shape is None
            else "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
        )
        elem = vi.type.tensor_type.elem_type
        if elem not in names:
            names[elem] = dtype_name(elem)
        out[vi.name] = f"{names[elem]}{dims}"
    if not input_shapes:
        for t in graph.initializer:
            out[t.name] = f"{dtype_name(t.data_type)}{list(t.dims)} (initializer)"
    return out


def run_types(
    m: Model,
    placement: PlacementResult | None,
    nodes: Sequence[GraphNode],
    constants: dict[str, str],
) -> dict[str, str]:
    """Tensor types for the view (a new dict): at a placement's input shapes (ONNX inference),
    and where inference cannot follow them (a Reshape to a computed shape), the shapes the
    kernel ORT ran under that node's own name wrote (the profile's output types). ``nodes``:
    the drawn nodes (``name``, ``outputs``)."""
    shapes = getattr(placement, "input_shapes", None)
    if not shapes or placement is None:
        return {**types_at(m, ()), **constants}
    concrete = types_at(m, shape_key(shapes))
    types = {**types_at(m, ()), **concrete}
    data = placement.profile.data if placement.profile is not None else None
    written = dict(zip(data.node, data.output_types, strict=True)) if data is not None else {}
    for n in nodes:
        outs = [t for t in n.outputs if t]
        ran = written.get(n.name, ())
        if len(ran) == len(outs):
            types.update(
                {t: types_text((ty,)) for t, ty in zip(outs, ran, strict=True) if t not in concrete}
            )
    return {**types, **constants}


def flops_at(m: Model, input_shapes: Mapping[str, Sequence[int]]) -> dict[str, float]:
    """FLOPs of one call of every main-graph node at these input shapes, from ONNX shape
    inference and :func:`ortlab.analysis.limits.formulas.node_cost` (NaN where a shape is unknown or
    no formula exists): what names a block when nothing was measured. A figure for ranking a
    block's ops, not one shown: ``ortlab.cost`` counts from the shapes a run really had.
    Cached per model and shapes (callers must not change it)."""
    return _cached(m, ("flops", *shape_key(input_shapes)), lambda: _flops(m, input_shapes))


def _flops(m: Model, input_shapes: Mapping[str, Sequence[int]]) -> dict[str, float]:
    graph = inferred_graph(m.proto, input_shapes)
    known: dict[str, Tensor] = {}
    names: dict[int, str] = {}  # element type -> its name
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        shape = value_info_shape(vi)
        if shape is not None and all(isinstance(d, int) for d in shape):
            elem = vi.type.tensor_type.elem_type
            if elem not in names:
                names[elem] = dtype_name(elem)
            known[vi.name] = (names[elem], shape)  # type: ignore[assignment]
    for t in m.proto.graph.initializer:
        known[t.name] = (dtype_name(t.data_type), tuple(int(d) for d in t.dims))
    out: dict[str, float] = {}
    counted: dict[tuple[Any, ...], float] = {}  # one formula call per distinct node signature
    for op, raw in m.node_protos:
        if op.parent:  # body nodes: inference does not type their tensors here
            continue
        ins = tuple([known.get(t) if t else None for t in op.inputs])
        outs = tuple([known.get(t) if t else None for t in op.outputs])
        attrs = attr_values(raw) if raw.attribute else {}
        key = (op.op_type, op.domain, ins, outs, *attrs.items())
        if key not in counted:
            counted[key] = node_cost(op.op_type, ins, outs, attrs, op.domain).flops
        out[op.name] = counted[key]
    return out
