"""Small helpers over onnx protos shared by the core modules (no ORT, no UI)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence

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


DTYPE_BYTES: dict[str, float] = {
    dtype_name(t): elem_bits(t) / 8 for t in TensorProto.DataType.values() if elem_bits(t) > 0
}
"""Bytes per element by ORT's dtype name ('float': 4, 'float16': 2, 'int4': 0.5, …): the one
table of element sizes, derived from ONNX's own types (strings, whose size depends on the
data, have none)."""


def np_dtype(name: str) -> np.dtype[np.generic]:
    """ORT's element type as numpy: 'float' (or 'tensor(float)', as a session's inputs say
    it) -> float32, 'int64' -> int64, 'bool' -> bool."""
    name = name.removeprefix("tensor(").removesuffix(")")
    return np.dtype(helper.tensor_dtype_to_np_dtype(int(TensorProto.DataType.Value(name.upper()))))


def tensor_nbytes(tensor: TensorProto) -> int:
    """Bytes of an initializer's data, without loading external data."""
    if tensor.data_location == TensorProto.EXTERNAL:
        info = {e.key: e.value for e in tensor.external_data}
        length = info.get("length", "")
        if length.isascii() and length.isdigit():  # damaged models hold any text: use the dims
            return int(length)
    elif tensor.raw_data:
        return len(tensor.raw_data)
    elif tensor.data_type == TensorProto.STRING:
        return sum(len(s) for s in tensor.string_data)
    count = math.prod(max(int(d), 0) for d in tensor.dims)
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


def bodies(node: onnx.NodeProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    """A control-flow node's bodies with their attribute tags: ``then_branch``,
    ``else_branch``, ``body``, or ``name[k]`` for a list of graphs. THE walk into bodies: every
    walker below and ``core.graph``'s node naming go through it."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.name, attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            many = len(attr.graphs) > 1
            for k, g in enumerate(attr.graphs):
                yield (f"{attr.name}[{k}]" if many else attr.name), g


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """A control-flow node's bodies (:func:`bodies` without the tags)."""
    for _, g in bodies(node):
        yield g


def ort_node_name(node: onnx.NodeProto, index: int) -> str:
    """The node's name as ORT's profiler and session know it: its own, or for an unnamed node
    ``<op_type>_<index in its graph>`` (ORT names unnamed nodes so when it loads a graph)."""
    return node.name or f"{node.op_type}_{index}"


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


def graph_defects(graph: onnx.GraphProto, where: str = "the main graph") -> list[str]:
    """Structural errors ORT refuses at session creation, each with its fix: duplicate node
    names, a tensor produced by two nodes, a cycle. Checked per graph, control-flow bodies
    included, as ORT does (a body node may share a name with an outer node), and never
    stricter than ORT: a Constant node does not count among names (ORT 1.31 turns Constant
    nodes into initializers before it checks them, so merged decoders whose branches repeat
    'Constant_338' load and run)."""
    out: list[str] = []
    names = Counter(  # unnamed nodes are fine too: ORT names them
        n.name for n in graph.node if n.name and not (n.op_type == "Constant" and not n.domain)
    )
    dups = [name for name, count in names.items() if count > 1]
    if dups:
        more = f" ({len(dups)} names are used twice or more)" if len(dups) > 1 else ""
        out.append(
            f"Node name {dups[0]!r} is used by {names[dups[0]]} nodes in {where}{more}: ORT "
            "refuses duplicate node names. Give each node a unique name, e.g. "
            "`for i, n in enumerate(model.graph.node): n.name = f'{n.op_type}_{i}'`, and save."
        )
    producer: dict[str, int] = {}
    for i, node in enumerate(graph.node):
        for t in node.output:
            if t and t in producer:
                first = graph.node[producer[t]]
                out.append(
                    f"Tensor {t!r} is the output of two nodes in {where} ({first.op_type} "
                    f"{first.name!r} and {node.op_type} {node.name!r}): ORT refuses it "
                    "('Duplicate definition of name'). Rename one of the outputs."
                )
                break
            if t:
                producer[t] = i
    cycle = _find_cycle(graph, producer)
    if cycle:
        shown = " -> ".join(repr(graph.node[i].name or graph.node[i].op_type) for i in cycle)
        out.append(
            f"The nodes of {where} form a cycle ({shown} -> back to the first): each consumes, "
            "through the others, its own output, and ORT refuses a graph that is not acyclic. "
            "The exporter or a graph edit wired an output back into an input; fix that edge."
        )
    for node in graph.node:
        for sub in subgraphs(node):
            label = f"the {sub.name or 'subgraph'!r} body of {node.op_type} node {node.name!r}"
            out += graph_defects(sub, label)
    return out


def _find_cycle(graph: onnx.GraphProto, producer: dict[str, int]) -> list[int]:
    """Node indices along one cycle (empty if the graph is acyclic), by Kahn's algorithm."""
    preds = [{producer[t] for t in node.input if t in producer} for node in graph.node]
    succs: list[list[int]] = [[] for _ in graph.node]
    for j, ps in enumerate(preds):
        for i in ps:
            succs[i].append(j)
    indegree = [len(ps) for ps in preds]
    ready = [j for j, d in enumerate(indegree) if d == 0]
    while ready:
        i = ready.pop()
        for j in succs[i]:
            indegree[j] -= 1
            if indegree[j] == 0:
                ready.append(j)
    left = {j for j, d in enumerate(indegree) if d > 0}
    if not left:
        return []
    # Every node left has a predecessor left: walking predecessors must come back to one.
    path: list[int] = []
    seen: dict[int, int] = {}
    j = min(left)
    while j not in seen:
        seen[j] = len(path)
        path.append(j)
        j = min(p for p in preds[j] if p in left)
    return path[seen[j] :][::-1]


def non_utf8_text(model: onnx.ModelProto) -> str | None:
    """Where the model holds a string that is not UTF-8, or None. ONNX strings are UTF-8; a
    damaged file can hold any bytes there, and protobuf (upb) then returns ``bytes``, not str."""
    top = [model.producer_name, model.producer_version, model.domain]
    top += [o.domain for o in model.opset_import]
    top += [x for p in model.metadata_props for x in (p.key, p.value)]
    if any(isinstance(v, bytes) for v in top):
        return "the model's producer, domain, opset or metadata fields"
    for func in model.functions:
        if any(isinstance(v, bytes) for v in (func.name, func.domain)):
            return f"the name of local function {func.name!r}"
        found = _bad_nodes(func.node, f"local function {func.name!r}")
        if found:
            return found
    return _bad_graph(model.graph, "the main graph")


def _bad_graph(graph: onnx.GraphProto, where: str) -> str | None:
    if isinstance(graph.name, bytes):
        return f"the name of {where}"
    for vi in (*graph.input, *graph.output, *graph.value_info):
        dims = vi.type.tensor_type.shape.dim
        if isinstance(vi.name, bytes) or any(isinstance(d.dim_param, bytes) for d in dims):
            return f"the name or a dim name of value {vi.name!r} in {where}"
    for t in graph.initializer:
        entries = [x for e in t.external_data for x in (e.key, e.value)]
        if isinstance(t.name, bytes) or any(isinstance(x, bytes) for x in entries):
            return f"the name or external-data entries of initializer {t.name!r} in {where}"
    return _bad_nodes(graph.node, where)


def _bad_nodes(nodes: Iterable[onnx.NodeProto], where: str) -> str | None:
    for node in nodes:
        texts = (node.name, node.op_type, node.domain, *node.input, *node.output)
        if any(isinstance(v, bytes) for v in texts):
            return f"the name, op type, domain or a tensor name of node {node.name!r} in {where}"
        for sub in subgraphs(node):
            found = _bad_graph(sub, f"a subgraph of node {node.name!r}")
            if found:
                return found
    return None


CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
"""Ops whose attributes hold subgraphs that run inside them."""


RANDOM_OPS = frozenset(
    {
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
    }
)
"""Ops that draw random numbers: without a ``seed`` attribute, ORT seeds each from one
process-wide seed when its session is created (``onnxruntime.set_seed`` sets it), and every run
draws new numbers."""


def _unseeded_random(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Random ops without a ``seed`` attribute, If/Loop/Scan bodies included."""
    for node, _ in walk_nodes(graph):
        seeded = any(a.name == "seed" for a in node.attribute)
        if node.op_type in RANDOM_OPS and node.domain in ("", "ai.onnx") and not seeded:
            yield node


def unseeded_random_ops(graph: onnx.GraphProto) -> dict[str, int]:
    """Random ops without a ``seed`` attribute, by op type: such a model's outputs differ
    from run to run."""
    return dict(sorted(Counter(n.op_type for n in _unseeded_random(graph)).items()))


def seed_random_ops(graph: onnx.GraphProto) -> int:
    """Give every unseeded random op (bodies included) a ``seed`` attribute made from its name
    (or first output), in place: two models that share such ops by name then draw the same
    numbers on every run. ``onnxruntime.set_seed`` does not do it: the float model and its
    int8 variant drew different numbers after it. Returns how many ops were seeded."""
    import zlib

    nodes = list(_unseeded_random(graph))  # (listed first: the walk must not see new seeds)
    for node in nodes:
        key = node.name or (node.output[0] if node.output else node.op_type)
        seed = float(zlib.crc32(key.encode("utf-8")) % (1 << 24))  # exact as a float
        node.attribute.append(helper.make_attribute("seed", seed))
    return len(nodes)


Attr = int | float | str | tuple[int, ...] | tuple[float, ...]
"""A node attribute a cost formula reads (tensors and graphs are left out)."""


def attr_values(node: onnx.NodeProto) -> dict[str, Attr]:
    """A node's scalar and list attributes as Python values (what cost formulas read)."""
    out: dict[str, Attr] = {}
    for a in node.attribute:
        if a.type == onnx.AttributeProto.INT:
            out[a.name] = int(a.i)
        elif a.type == onnx.AttributeProto.FLOAT:
            out[a.name] = float(a.f)
        elif a.type == onnx.AttributeProto.STRING:
            out[a.name] = a.s.decode("utf-8", "replace")
        elif a.type == onnx.AttributeProto.INTS:
            out[a.name] = tuple(int(x) for x in a.ints)
        elif a.type == onnx.AttributeProto.FLOATS:
            out[a.name] = tuple(float(x) for x in a.floats)
    return out


def inferred_graph(
    model: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> onnx.GraphProto:
    """The graph with ONNX shape inference's value_info, inferred on a copy without the big
    weights (copying a 100 MB model costs ~20 ms; inference needs their dims and dtype only,
    small ones may be Reshape targets). Best effort: the declared graph if inference fails.
    ``input_shapes``: infer at these concrete input shapes (a run's), not the declared dims."""
    import math

    light = onnx.ModelProto()
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    g = model.graph
    light.graph.name = g.name
    light.graph.node.extend(g.node)
    light.graph.input.extend(g.input)
    for vi in light.graph.input:
        shape = (input_shapes or {}).get(vi.name)
        declared = vi.type.tensor_type.shape.dim
        if shape is not None and len(shape) == len(declared):
            for dim, value in zip(declared, shape, strict=True):
                dim.Clear()
                dim.dim_value = int(value)
    light.graph.output.extend(g.output)
    light.graph.value_info.extend(g.value_info)
    for t in g.initializer:
        if math.prod(t.dims) <= 4096:
            light.graph.initializer.append(t)
        else:
            light.graph.initializer.add(name=t.name, data_type=t.data_type, dims=t.dims)
    try:
        return onnx.shape_inference.infer_shapes(
            light, strict_mode=False, data_prop=bool(input_shapes)
        ).graph
    except Exception:  # noqa: BLE001 - inference is best effort: keep the declared types
        return light.graph


COMPUTE_OPS = frozenset({"MatMul", "Gemm", "Conv"})
"""The ops that carry a network's weights and most of its work."""


def compute_in_bodies(graph: onnx.GraphProto) -> int:
    """MatMul/Gemm/Conv nodes inside control-flow bodies (0 for most models; an optimum
    merged decoder holds all of them in its If's branches)."""
    return sum(1 for n, depth in walk_nodes(graph) if depth > 0 and n.op_type in COMPUTE_OPS)


def typed_inputs(proto: onnx.ModelProto, arrays: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """``proto`` with each graph input that has an array in ``arrays`` typed as that array
    (dtype and shape): ORT refuses a model whose inputs carry no type."""
    from onnx import helper

    for i, vi in enumerate(list(proto.graph.input)):
        if vi.name in arrays:
            a = np.asarray(arrays[vi.name])
            elem = helper.np_dtype_to_tensor_dtype(a.dtype)
            proto.graph.input[i].CopyFrom(
                helper.make_tensor_value_info(vi.name, elem, list(a.shape))
            )
    return proto


def as_types(
    arrays: Mapping[str, np.ndarray], types: Mapping[str, str] | None
) -> dict[str, np.ndarray]:
    """``arrays`` with each floating array cast to the floating dtype ``types`` names for it
    (a side's own type for the tensor); integer and unnamed ones as they are."""
    out = dict(arrays)
    for name, a in arrays.items():
        try:
            want = np.dtype((types or {}).get(name, a.dtype))
        except TypeError:  # a dtype numpy does not name (bfloat16 without ml_dtypes)
            continue
        if want != a.dtype and np.issubdtype(a.dtype, np.floating) and want.kind == "f":
            out[name] = a.astype(want)
    return out
