"""What one node computes and moves, from its tensors' shapes: FLOPs and bytes per call.

Pure formulas, no ORT. Conventions (the ones onnx-tool, fvcore and the roofline literature use):
a multiply-accumulate is 2 FLOPs; a bias add, an activation or a residual sum adds one FLOP per
output element; an elementwise op costs a fixed number of FLOPs per output element (the table
below: a transcendental counts one); data movement (Reshape, Transpose, Gather…) costs none.
Bytes are every input read once plus every output written once, weights included, at the
tensors' dtypes: the traffic a kernel cannot avoid, not what its caches see. A metadata op
(Shape, Size) reads no data; an op ORT runs in place (Reshape, Squeeze, Unsqueeze, Flatten,
Identity: :data:`ALIASING`) moves none. An indexing op (Gather, GatherElements, GatherND,
Slice) reads what it touches, not its whole input: its indices and the rows it copies (the output's
elements), so an embedding lookup of 8 ids reads 8 rows, not the 30522 x 768 table; likewise
a rotary embedding (RotaryEmbedding, GroupQueryAttention's cos/sin caches) reads the cache rows
of the positions it rotates. A node ortlab has no formula for is 'unknown': its FLOPs are NaN
and the roofline leaves it out of its verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ortlab.analysis.limits.opkinds import ALIASING, CONTROL, DATA, METADATA
from ortlab.core.onnx_util import DTYPE_BYTES

__all__ = ["NodeCost", "Tensor", "compute_dtype", "node_cost"]

Tensor = tuple[str, tuple[int, ...]]
"""(ORT dtype name, dims)."""


_PRECISION = {
    "float": "fp32",
    "double": "fp64",
    "float16": "fp16",
    "bfloat16": "bf16",
    "int8": "int8",
    "uint8": "int8",
    "int4": "int4",
    "uint4": "int4",
}

# FLOPs per output element of elementwise ops (unary, binary with broadcast, activations).
_PER_ELEMENT = {
    **dict.fromkeys(
        (
            "Add",
            "Sub",
            "Mul",
            "Div",
            "Neg",
            "Abs",
            "Relu",
            "Sqrt",
            "Reciprocal",
            "Exp",
            "Log",
            "Tanh",
            "Erf",
            "Sin",
            "Cos",
            "Floor",
            "Ceil",
            "Round",
            "Sign",
            "Pow",
            "Mod",
            "Max",
            "Min",
            "Equal",
            "Less",
            "Greater",
            "LessOrEqual",
            "GreaterOrEqual",
            "And",
            "Or",
            "Xor",
            "Not",
            "Where",
            "IsNaN",
            "IsInf",
            "BitShift",
            "Clip",
            "Relu6",
            "Tan",
            "Atan",
            "Asin",
            "Acos",
            "Sinh",
            "Cosh",
            "Asinh",
            "Acosh",
            "Atanh",
            "BitwiseAnd",
            "BitwiseOr",
            "BitwiseXor",
            "BitwiseNot",
            "Trunc",
        ),
        1,
    ),
    "LeakyRelu": 2,
    "PRelu": 2,
    "ThresholdedRelu": 1,
    "Elu": 3,
    "Selu": 4,
    "Celu": 4,
    "Softplus": 3,
    "Softsign": 3,
    "Sigmoid": 4,
    "HardSigmoid": 3,
    "HardSwish": 4,
    "Swish": 5,
    "Mish": 6,
    "Gelu": 5,
    "FastGelu": 8,
    "BiasGelu": 6,
    "QuickGelu": 5,
    "BiasAdd": 2,
    "Shrink": 2,
    "QuantizeLinear": 2,
    "DequantizeLinear": 2,
    "DynamicQuantizeLinear": 4,
    "QLinearAdd": 5,
    "QLinearMul": 5,
    "QLinearSigmoid": 8,
    "QLinearLeakyRelu": 6,
    "BatchNormalization": 2,
    "Softmax": 5,
    "LogSoftmax": 5,
    "Hardmax": 1,
    "LayerNormalization": 8,
    "SkipLayerNormalization": 9,
    "SimplifiedLayerNormalization": 5,
    "SkipSimplifiedLayerNormalization": 6,
    "RotaryEmbedding": 3,
    "InstanceNormalization": 8,
    "GroupNorm": 8,
    "GroupNormalization": 8,
    "LpNormalization": 3,
    "MeanVarianceNormalization": 6,
    "Affine": 2,
    "ScaledTanh": 3,
    "ParametricSoftplus": 4,
    "BiasSoftmax": 6,
    "BiasDropout": 2,
}

# FLOPs per input element of reductions.
_PER_INPUT = {
    **dict.fromkeys(
        (
            "ReduceSum",
            "ReduceMean",
            "ReduceMax",
            "ReduceMin",
            "ReduceProd",
            "ReduceL1",
            "ArgMax",
            "ArgMin",
            "GlobalAveragePool",
            "GlobalMaxPool",
            "QLinearGlobalAveragePool",
            "CumSum",
            "TopK",
        ),
        1,
    ),
    "ReduceL2": 2,
    "ReduceSumSquare": 2,
    "ReduceLogSum": 1,
    "ReduceLogSumExp": 3,
    "GlobalLpPool": 2,
}

_POOLS = frozenset(
    ("MaxPool", "AveragePool", "LpPool", "QLinearAveragePool", "MaxRoiPool", "RoiAlign")
)


@dataclass(frozen=True)
class NodeCost:
    """One call of one node: FLOPs (NaN when ortlab has no formula or lacks a shape), bytes
    read and written (NaN when a tensor's shape is unknown), the precision it computes in
    (fp32, fp16, int8…), what kind of work it is, and a note when a figure is partial."""

    flops: float
    bytes_read: float
    bytes_written: float
    dtype: str
    kind: str
    """'compute' (Conv, MatMul, Gemm, attention, recurrent), 'elementwise', 'reduction',
    'pooling', 'data' (movement, no arithmetic), 'control' (If/Loop/Scan: their bodies' nodes
    are counted on their own rows) or 'unknown'."""
    note: str = ""

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written


def _size(t: Tensor | None) -> float:
    return float(math.prod(t[1])) if t is not None else math.nan


def _nbytes(t: Tensor | None) -> float:
    if t is None:
        return math.nan
    return _size(t) * DTYPE_BYTES.get(t[0], math.nan)


def compute_dtype(ins: Sequence[Tensor | None]) -> str:
    """The precision a node computes in: its first input's (fp32, fp16, int8…)."""
    for t in ins:
        if t is not None:
            return _PRECISION.get(t[0], t[0])
    return "?"


def _at(seq: Sequence[Tensor | None], i: int) -> Tensor | None:
    return seq[i] if i < len(seq) else None


def _conv(
    op: str, ins: Sequence[Tensor | None], out: Tensor | None, attrs: Mapping[str, object]
) -> tuple[float, str]:
    w_at = 3 if op == "QLinearConv" else 1
    x, w = _at(ins, 0), _at(ins, w_at)
    if w is None or out is None or x is None:
        return math.nan, "a weight or output shape is unknown"
    per_out = float(math.prod(w[1][1:]))
    flops = 2 * _size(x if op == "ConvTranspose" else out) * per_out
    bias_at = 8 if op == "QLinearConv" else 2
    if op not in ("ConvInteger",) and _at(ins, bias_at) is not None:
        flops += _size(out)
    if op == "FusedConv":
        flops += _size(out) * (1 if attrs.get("activation") else 0)
        flops += _size(out) if _at(ins, 3) is not None else 0
    if op == "Conv" and "activation" in attrs:  # NCHWc Conv with a fused activation / sum
        flops += _size(out) + (_size(out) if _at(ins, 3) is not None else 0)
    return flops, ""


def _matmul(
    op: str, ins: Sequence[Tensor | None], out: Tensor | None, attrs: Mapping[str, object]
) -> tuple[float, str]:
    a = _at(ins, 0)
    if a is None or out is None:
        return math.nan, "an input or output shape is unknown"
    dims = a[1]
    if op == "MatMulNBits" and "K" in attrs:
        k = int(attrs["K"])  # type: ignore[call-overload]
    elif op in ("Gemm", "QGemm", "FusedGemm"):
        k = dims[0] if attrs.get("transA") else dims[-1]
    elif op in ("FusedMatMul", "TransposeMatMul") and attrs.get("transA") and len(dims) >= 2:
        k = dims[-2]
    else:
        k = dims[-1] if dims else 1
    flops = 2 * _size(out) * k
    if op in ("Gemm", "FusedGemm") and _at(ins, 2) is not None:
        flops += _size(out)
    if op == "QGemm" and _at(ins, 6) is not None:
        flops += _size(out)
    if op == "MatMulIntegerToFloat":
        flops += _size(out) * (2 if _at(ins, 6) is not None else 1)  # scale (and bias)
    if op in ("FusedMatMul", "FusedGemm") and attrs.get("activation"):
        flops += _size(out)
    return flops, ""


def _attention(
    op: str, ins: Sequence[Tensor | None], out: Tensor | None, attrs: Mapping[str, object]
) -> tuple[float, str]:
    """Projections (Attention's packed QKV weight) plus QK^T and AV (2 MACs per query, key
    and channel) plus the softmax (5 per score)."""
    del out
    q = _at(ins, 0)
    if q is None or len(q[1]) < 3:
        return math.nan, "the query's shape is unknown"
    b, s = q[1][0], q[1][1]
    heads = int(attrs.get("num_heads", 1))  # type: ignore[call-overload]
    flops = 0.0
    if op == "Attention":
        w = _at(ins, 1)
        if w is None:
            return math.nan, "the weight's shape is unknown"
        flops += 2 * b * s * _size(w)
        hidden = w[1][-1] / 3
        past = _at(ins, 4)
        skv = s + (past[1][3] if past is not None and len(past[1]) == 5 else 0)
    elif op == "MultiHeadAttention":
        key = _at(ins, 1)
        if key is None:  # packed QKV: (B, S, N, 3, H)
            hidden = float(math.prod(q[1][2:])) / 3
            skv = s
        else:
            hidden = float(math.prod(q[1][2:]))
            skv = key[1][2] if len(key[1]) == 4 else key[1][1]  # (B, N, Skv, H) or (B, Skv, D)
    else:  # GroupQueryAttention and friends: query (B, S, D) (or packed QKV)
        hidden = float(math.prod(q[1][2:]))
        kv_heads = int(attrs.get("kv_num_heads", heads))  # type: ignore[call-overload]
        if _at(ins, 1) is None and kv_heads:  # packed: D = (N + 2 kv_heads) H
            hidden = hidden * heads / (heads + 2 * kv_heads)
        past = _at(ins, 3)
        skv = s + (past[1][2] if past is not None and len(past[1]) == 4 else 0)
    flops += 4 * b * s * skv * hidden + 5 * b * heads * s * skv
    return flops, ""


def _recurrent(
    op: str, ins: Sequence[Tensor | None], out: Tensor | None, attrs: Mapping[str, object]
) -> tuple[float, str]:
    """Per time step and direction, the gates' two matmuls (input and recurrence weights: 2
    FLOPs per weight per batch row) plus ~10 FLOPs per gate element (activations, cell)."""
    del out
    x, w, r = _at(ins, 0), _at(ins, 1), _at(ins, 2)
    if x is None or w is None or r is None:
        return math.nan, "an input or weight shape is unknown"
    seq, batch = (x[1][1], x[1][0]) if attrs.get("layout") else (x[1][0], x[1][1])
    gates = float(w[1][1] if op != "DynamicQuantizeLSTM" else w[1][2]) * w[1][0]
    return seq * batch * (2 * (_size(w) + _size(r)) + 10 * gates), ""


def _einsum(
    op: str, ins: Sequence[Tensor | None], out: Tensor | None, attrs: Mapping[str, object]
) -> tuple[float, str]:
    """One multiply-add per point of the space of all indices (2 FLOPs with two operands)."""
    del op, out
    equation = str(attrs.get("equation", "")).replace(" ", "")
    terms = equation.split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for term, t in zip(terms, ins, strict=False):
        if t is None or "." in term or len(term) != len(t[1]):
            return math.nan, "an Einsum with ellipses or unknown shapes"
        sizes.update(zip(term, t[1], strict=True))
    return (2.0 if len(terms) > 1 else 1.0) * math.prod(sizes.values()), ""


def _pool(
    op: str, ins: Sequence[Tensor | None], out: Tensor | None, attrs: Mapping[str, object]
) -> tuple[float, str]:
    del op
    kernel = attrs.get("kernel_shape") or attrs.get("pooled_shape")
    if out is None:
        return math.nan, "the output's shape is unknown"
    if not isinstance(kernel, tuple):
        return _size(_at(ins, 0)), "kernel size unknown: counted one op per input element"
    return _size(out) * math.prod(kernel), ""


def _resize(
    op: str, ins: Sequence[Tensor | None], out: Tensor | None, attrs: Mapping[str, object]
) -> tuple[float, str]:
    del op
    x = _at(ins, 0)
    mode = str(attrs.get("mode", "nearest"))
    if mode == "nearest" or out is None or x is None:
        return (0.0 if out is not None else math.nan), ""
    scaled = sum(1 for a, b in zip(x[1], out[1], strict=False) if a != b) or 1
    taps = 4 if mode == "cubic" else 2
    return 2.0 * taps**scaled * _size(out), ""


Formula = Callable[
    [str, Sequence["Tensor | None"], "Tensor | None", Mapping[str, object]], tuple[float, str]
]


def _elementwise(
    op: str, ins: Sequence[Tensor | None], out: Tensor | None, attrs: Mapping[str, object]
) -> tuple[float, str]:
    del attrs
    if op in ("Sum", "Mean"):
        return max(sum(1 for t in ins if t is not None) - 1, 1) * _size(out), ""
    return _PER_ELEMENT[op] * _size(out), ""


def _reduction(
    op: str, ins: Sequence[Tensor | None], out: Tensor | None, attrs: Mapping[str, object]
) -> tuple[float, str]:
    del out, attrs
    return _PER_INPUT[op] * _size(_at(ins, 0)), ""


_FAMILIES: tuple[tuple[frozenset[str], str, Formula], ...] = (
    (
        frozenset(
            (
                "Conv",
                "FusedConv",
                "ConvInteger",
                "QLinearConv",
                "ConvTranspose",
                "NhwcConv",
                "NhwcFusedConv",
            )
        ),
        "compute",
        _conv,
    ),
    (
        frozenset(
            (
                "MatMul",
                "MatMulInteger",
                "QLinearMatMul",
                "MatMulNBits",
                "FusedMatMul",
                "TransposeMatMul",
                "Gemm",
                "QGemm",
                "FusedGemm",
                "MatMulIntegerToFloat",
                "DynamicQuantizeMatMul",
                "MatMulBnb4",
                "MatMulFpQ4",
            )
        ),
        "compute",
        _matmul,
    ),
    (
        frozenset(
            (
                "Attention",
                "MultiHeadAttention",
                "GroupQueryAttention",
                "PackedMultiHeadAttention",
                "DecoderMaskedMultiHeadAttention",
            )
        ),
        "compute",
        _attention,
    ),
    (frozenset(("LSTM", "GRU", "RNN", "DynamicQuantizeLSTM")), "compute", _recurrent),
    (frozenset(("Einsum",)), "compute", _einsum),
    (frozenset((*_PER_ELEMENT, "Sum", "Mean")), "elementwise", _elementwise),
    (frozenset(_PER_INPUT), "reduction", _reduction),
    (_POOLS, "pooling", _pool),
    (frozenset(("Resize", "Upsample")), "elementwise", _resize),
)
"""Op families: the ops, their kind, their formula (op, inputs, first output, attributes)."""


_INDEXING = {"Gather": 1, "GatherElements": 1, "GatherND": 1, "Slice": 1}
"""Indexing ops, and the input their index inputs start at (the data input is 0)."""
_ROTARY_CACHES = {"RotaryEmbedding": (2, 3), "GroupQueryAttention": (7, 8)}
"""Ops that read cos/sin caches (max positions x rotary dim / 2) at these inputs."""


def _touched(op: str, ins: Sequence[Tensor | None], outs: Sequence[Tensor | None]) -> float | None:
    """Bytes an indexing or rotary op reads, where that is less than its whole inputs: the
    index inputs and the rows copied (an indexing op), or the cache rows of the positions
    rotated (one row per query position); None for every other op."""
    out = _at(outs, 0)
    if op in _INDEXING and out is not None and _at(ins, 0) is not None:
        indices = sum(_nbytes(t) for t in ins[_INDEXING[op] :] if t is not None)
        rows = _size(out) * DTYPE_BYTES.get(ins[0][0], math.nan)  # type: ignore[index]
        return indices + min(rows, _nbytes(ins[0]))  # a row read twice is read from cache
    if op in _ROTARY_CACHES:
        q = _at(ins, 0)
        caches = [_at(ins, k) for k in _ROTARY_CACHES[op]]
        if q is None or len(q[1]) < 2 or any(c is None or len(c[1]) != 2 for c in caches):
            return None
        ids = _at(ins, 1) if op == "RotaryEmbedding" else None
        if ids is not None and _size(ids) > 1:  # position_ids (B, S)
            positions = _size(ids)
        elif op == "RotaryEmbedding" and len(q[1]) == 4:  # (B, N, S, H)
            positions = float(q[1][0] * q[1][2])
        else:  # (B, S, hidden): one cache row per position
            positions = float(q[1][0] * q[1][1])
        others = sum(
            _nbytes(t) for k, t in enumerate(ins) if t is not None and k not in _ROTARY_CACHES[op]
        )
        used = sum(
            min(positions, c[1][0]) * c[1][1] * DTYPE_BYTES.get(c[0], math.nan)
            for c in caches
            if c is not None
        )
        return others + used
    return None


def _precision(op: str, ins: Sequence[Tensor | None], attrs: Mapping[str, object]) -> str:
    """The precision a node computes in: its first input's, except MatMulNBits at accuracy
    level 4, which quantizes its float activations to int8 and multiplies in int8 (the MLAS
    kernels ORT runs on the CPU): set against the int8 ceiling, not the fp32 one."""
    if op == "MatMulNBits" and int(attrs.get("accuracy_level", 0)) == 4:  # type: ignore[call-overload]
        return "int8"
    return compute_dtype(ins)


_MOE = {"MoE": (2, 4, 6), "QMoE": (2, 5, 8)}
"""A mixture-of-experts op's per-expert weight inputs ([experts, …]: fc1, fc2, fc3)."""


def _moe(
    op: str, ins: Sequence[Tensor | None], attrs: Mapping[str, object]
) -> tuple[float, float, str]:
    """Each token runs its top ``k`` of the ``experts`` (the weights' first dim): 2 FLOPs per
    weight of each active expert per token, plus one per activation of its hidden layer;
    bytes: the activations and the router's scores, and the weights (biases and scales too) of
    the experts the tokens can reach, min(experts, tokens x k) of them (at most: the routing
    picks which, and tokens share experts)."""
    x = _at(ins, 0)
    weights = [w for i in _MOE[op] if (w := _at(ins, i)) is not None]
    if x is None or not x[1] or not weights:
        return math.nan, math.nan, "the input's or the experts' shapes are unknown"
    experts = weights[0][1][0]
    k = int(attrs.get("k", 1))  # type: ignore[call-overload]
    tokens = _size(x) / x[1][-1]
    per_weight = 8 / int(attrs.get("expert_weight_bits", 8)) if op == "QMoE" else 1  # type: ignore[call-overload]
    macs = sum(_size(w) for w in weights) * per_weight / experts
    inner = weights[-1][1][-1] * per_weight if len(weights[-1][1]) == 3 else 0
    flops = tokens * k * (2 * macs + inner)
    per_expert = [t for t in ins[2:] if t is not None and t[1] and t[1][0] == experts]
    expert_bytes = sum(_nbytes(t) for t in per_expert) / experts
    active = min(experts, tokens * k)
    read = _nbytes(x) + _nbytes(_at(ins, 1)) + active * expert_bytes
    note = (
        f"top-{k} of {experts} experts per token: the weights of {active:g} expert(s) counted "
        "(at most; the routing picks which)"
    )
    return flops, read, note


def node_cost(
    op_type: str,
    ins: Sequence[Tensor | None],
    outs: Sequence[Tensor | None],
    attrs: Mapping[str, object] | None = None,
    domain: str = "",
) -> NodeCost:
    """The cost of one call of an ``op_type`` node whose inputs and outputs have these
    (dtype, dims) (None: absent optional input, or a shape nobody recorded)."""
    attrs = attrs or {}
    dtype = _precision(op_type, ins, attrs)
    written = sum(_nbytes(t) for t in outs if t is not None)
    if op_type in _MOE:  # reads the experts its tokens reach, not every expert's weights
        flops, read_moe, note = _moe(op_type, ins, attrs)
        return NodeCost(flops, read_moe, written, dtype, "compute", note)
    touched = _touched(op_type, ins, outs)
    if op_type in ALIASING and not domain:
        return NodeCost(0.0, 0.0, 0.0, dtype, "data", "aliases its input in ORT: no bytes move")
    read = (
        0.0
        if op_type in METADATA
        else touched
        if touched is not None
        else sum(_nbytes(t) for t in ins if t is not None)
    )
    if op_type in CONTROL:
        note = "its body's nodes are counted on their own rows"
        return NodeCost(0.0, 0.0, 0.0, dtype, "control", note)
    for ops, kind, formula in _FAMILIES:
        if op_type in ops:
            flops, note = formula(op_type, ins, _at(outs, 0), attrs)
            gather = kind == "elementwise" and flops == 0  # nearest-neighbour Resize
            return NodeCost(flops, read, written, dtype, "data" if gather else kind, note)
    if op_type in DATA:
        return NodeCost(0.0, read, written, dtype, "data")
    where = f"{domain}:{op_type}" if domain and domain != "ai.onnx" else op_type
    return NodeCost(math.nan, read, written, dtype, "unknown", f"no formula for op {where}")
