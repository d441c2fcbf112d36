"""The example models ortlab builds itself: small graphs, with seeded random weights, written the
way exporters write them so that ORT's fusions have something to fuse.

Conv+BatchNorm+Relu (folding and activation fusion), an MLP of MatMul+Add (Gemm fusion), a
residual CNN, a BERT-style encoder with PyTorch-style scoped node names (LayerNorm, Gelu and
attention patterns), a GPT-style decoder with a key/value cache, and a CNN with a NaN guard
that OpenVINO splits around a CPU node. :data:`GENERATED` names them for
:func:`ortlab.engine.examples.load`, which caches their files.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from ortlab.core.builder import F32, I64, GraphBuilder

__all__ = [
    "GENERATED",
    "bert_tiny",
    "conv_bn_relu",
    "decoder_tiny",
    "mlp",
    "nan_guard_cnn",
    "residual_cnn",
]


def _conv(
    g: GraphBuilder,
    x: str,
    name: str,
    shape: tuple[int, int, int, int],
    *,
    scope: str,
    bias: bool = True,
    strides: list[int] | None = None,
) -> str:
    """A Conv padded by 1 as exporters write it: its weight ``{name}.weight`` of ``shape`` (out,
    in, kernel height, width), drawn for its fan-in (in * height * width), and (unless ``bias``
    is False) a zero ``{name}.bias``."""
    out, channels, height, width = shape
    inputs = [x, g.weight(f"{name}.weight", shape, channels * height * width)]
    if bias:
        inputs.append(g.const(f"{name}.bias", np.zeros(out, np.float32)))
    return g.op("Conv", inputs, scope=scope, pads=[1, 1, 1, 1], strides=strides)


def _logits(g: GraphBuilder, x: str, name: str, shape: tuple[int, int], scope: str) -> None:
    """A classifier's head: a Gemm with weight ``{name}.weight`` of ``shape`` and a zero
    ``{name}.bias``, writing the graph's ``logits``."""
    weight = g.weight(f"{name}.weight", shape)
    bias = g.const(f"{name}.bias", np.zeros(shape[1], np.float32))
    g.op("Gemm", [x, weight, bias], scope=scope, out=["logits"])


def conv_bn_relu() -> onnx.ModelProto:
    """Conv -> BatchNormalization -> Relu, twice: ORT folds BN (basic), fuses Relu (extended)."""
    g = GraphBuilder("conv_bn_relu")
    x = g.input("input", F32, ["batch", 3, 32, 32])
    for i, (cin, cout) in enumerate(((3, 16), (16, 32))):
        scope = f"/features/block{i}"
        x = _conv(g, x, f"features.block{i}.conv", (cout, cin, 3, 3), scope=scope, bias=False)
        stats = {
            "weight": 1 + 0.1 * g.rng.standard_normal(cout),
            "bias": 0.1 * g.rng.standard_normal(cout),
            "running_mean": 0.1 * g.rng.standard_normal(cout),
            "running_var": g.rng.uniform(0.5, 1.5, cout),
        }
        bn = [g.const(f"features.block{i}.bn.{k}", v.astype(np.float32)) for k, v in stats.items()]
        x = g.op("BatchNormalization", [x, *bn], scope=scope)
        x = g.op("Relu", [x], scope=scope)
    g.op("GlobalAveragePool", [x], scope="/head", out=["pooled"])
    g.output("pooled", F32, ["batch", 32, 1, 1])
    return g.model()


def mlp() -> onnx.ModelProto:
    """Three MatMul+Add layers with Relu: ORT turns MatMul+Add into Gemm (basic)."""
    g = GraphBuilder("mlp")
    x = g.input("input", F32, ["batch", 256])
    sizes = (256, 512, 512, 10)
    for i in range(3):
        scope = f"/layers.{i}"
        w = g.weight(f"layers.{i}.weight", (sizes[i], sizes[i + 1]))
        b = g.const(f"layers.{i}.bias", np.zeros(sizes[i + 1], np.float32))
        x = g.op("Add", [g.op("MatMul", [x, w], scope=scope), b], scope=scope)
        if i < 2:
            x = g.op("Relu", [x], scope=scope)
    g.nodes[-1].output[0] = "logits"
    g.output("logits", F32, ["batch", 10])
    return g.model()


def residual_cnn() -> onnx.ModelProto:
    """Two residual blocks (Conv-Relu-Conv + skip Add) and a classifier head."""
    g = GraphBuilder("residual_cnn")
    x = g.input("input", F32, ["batch", 3, 64, 64])
    x = _conv(g, x, "stem", (32, 3, 3, 3), scope="/stem", strides=[2, 2])
    x = g.op("Relu", [x], scope="/stem")
    for i in range(2):
        s = f"/layer{i}"
        h = _conv(g, x, f"layer{i}.conv1", (32, 32, 3, 3), scope=s + "/conv1", bias=False)
        h = g.op("Relu", [h], scope=s + "/conv1")
        h = _conv(g, h, f"layer{i}.conv2", (32, 32, 3, 3), scope=s + "/conv2", bias=False)
        x = g.op("Relu", [g.op("Add", [h, x], scope=s)], scope=s)
    x = g.op("GlobalAveragePool", [x], scope="/head")
    x = g.op("Flatten", [x], scope="/head")
    _logits(g, x, "fc", (32, 10), "/head")
    g.output("logits", F32, ["batch", 10])
    return g.model()


def _layer_norm(g: GraphBuilder, x: str, scope: str, hidden: int) -> str:
    """LayerNorm written out as PyTorch's old exporter does (ORT fuses it at basic)."""
    mean = g.op("ReduceMean", [x], scope=scope, axes=[-1])
    d = g.op("Sub", [x, mean], scope=scope)
    var = g.op(
        "ReduceMean",
        [g.op("Pow", [d, g.const(f"{scope}.two", np.float32(2))], scope=scope)],
        scope=scope,
        axes=[-1],
    )
    std = g.op(
        "Sqrt",
        [g.op("Add", [var, g.const(f"{scope}.eps", np.float32(1e-12))], scope=scope)],
        scope=scope,
    )
    y = g.op("Div", [d, std], scope=scope)
    y = g.op("Mul", [y, g.const(f"{scope}.weight", np.ones(hidden, np.float32))], scope=scope)
    return g.op("Add", [y, g.const(f"{scope}.bias", np.zeros(hidden, np.float32))], scope=scope)


def _linear(g: GraphBuilder, x: str, scope: str, n_in: int, n_out: int) -> str:
    w = g.weight(f"{scope}.weight", (n_in, n_out))
    b = g.const(f"{scope}.bias", (0.01 * g.rng.standard_normal(n_out)).astype(np.float32))
    return g.op("Add", [g.op("MatMul", [x, w], scope=scope), b], scope=scope)


def _gelu(g: GraphBuilder, x: str, scope: str) -> str:
    """Erf-based Gelu as exported by PyTorch (ORT fuses it at extended)."""
    e = g.op(
        "Erf",
        [g.op("Div", [x, g.const(f"{scope}.sqrt2", np.float32(np.sqrt(2)))], scope=scope)],
        scope=scope,
    )
    y = g.op(
        "Mul",
        [x, g.op("Add", [e, g.const(f"{scope}.one", np.float32(1))], scope=scope)],
        scope=scope,
    )
    return g.op("Mul", [y, g.const(f"{scope}.half", np.float32(0.5))], scope=scope)


def _attention(g: GraphBuilder, x: str, mask: str, scope: str, *, hidden: int, heads: int) -> str:
    hd = hidden // heads
    split = g.const(f"{scope}.heads_shape", np.array([0, 0, heads, hd], np.int64))
    qkv = []
    for part in ("query", "key", "value"):
        t = _linear(g, x, f"{scope}/self/{part}", hidden, hidden)
        t = g.op("Reshape", [t, split], scope=f"{scope}/self/{part}")
        perm = [0, 2, 3, 1] if part == "key" else [0, 2, 1, 3]
        qkv.append(g.op("Transpose", [t], scope=f"{scope}/self/{part}", perm=perm))
    s = f"{scope}/self"
    scores = g.op("MatMul", [qkv[0], qkv[1]], scope=s)
    scores = g.op("Div", [scores, g.const(f"{s}.scale", np.float32(np.sqrt(hd)))], scope=s)
    probs = g.op("Softmax", [g.op("Add", [scores, mask], scope=s)], scope=s, axis=-1)
    ctx = g.op("Transpose", [g.op("MatMul", [probs, qkv[2]], scope=s)], scope=s, perm=[0, 2, 1, 3])
    ctx = g.op(
        "Reshape", [ctx, g.const(f"{s}.merge_shape", np.array([0, 0, hidden], np.int64))], scope=s
    )
    return _linear(g, ctx, f"{scope}/output/dense", hidden, hidden)


def bert_tiny(
    layers: int = 2, hidden: int = 128, heads: int = 4, vocab: int = 1000
) -> onnx.ModelProto:
    """A BERT-style encoder (embeddings, attention with mask, Gelu FFN, post-LayerNorm)."""
    g = GraphBuilder("bert_tiny")
    ids = g.input("input_ids", I64, ["batch", "sequence"])
    mask_in = g.input("attention_mask", I64, ["batch", "sequence"])
    x = g.op(
        "Gather",
        [g.weight("embeddings.word_embeddings.weight", (vocab, hidden), hidden), ids],
        scope="/embeddings/word_embeddings",
    )
    x = _layer_norm(g, x, "/embeddings/LayerNorm", hidden)
    axis1 = g.const("mask_axis1", np.array([1], np.int64))
    m = g.op("Unsqueeze", [mask_in, axis1], scope="/extended_mask")
    m = g.op(
        "Unsqueeze", [m, g.const("mask_axis2", np.array([2], np.int64))], scope="/extended_mask"
    )
    m = g.op("Cast", [m], scope="/extended_mask", to=F32)
    m = g.op("Sub", [g.const("mask_one", np.float32(1)), m], scope="/extended_mask")
    m = g.op("Mul", [m, g.const("mask_min", np.float32(-10000.0))], scope="/extended_mask")
    for i in range(layers):
        s = f"/encoder/layer.{i}"
        a = _attention(g, x, m, f"{s}/attention", hidden=hidden, heads=heads)
        x = _layer_norm(
            g,
            g.op("Add", [a, x], scope=f"{s}/attention/output"),
            f"{s}/attention/output/LayerNorm",
            hidden,
        )
        h = _gelu(
            g,
            _linear(g, x, f"{s}/intermediate/dense", hidden, 4 * hidden),
            f"{s}/intermediate/intermediate_act_fn",
        )
        h = _linear(g, h, f"{s}/output/dense", 4 * hidden, hidden)
        x = _layer_norm(
            g, g.op("Add", [h, x], scope=f"{s}/output"), f"{s}/output/LayerNorm", hidden
        )
    g.nodes[-1].output[0] = "last_hidden_state"
    g.output("last_hidden_state", F32, ["batch", "sequence", hidden])
    return g.model()


def _causal_attention(
    g: GraphBuilder, x: str, scope: str, layer: int, *, hidden: int, heads: int
) -> str:
    """Self-attention with a key/value cache: the new keys and values are appended to the
    past ones (``past_key_values.N.*`` in, ``present.N.*`` out, GPT-2/Llama export names), and
    a causal mask lets each new position see the past and itself."""
    hd = hidden // heads
    split = g.const(f"{scope}.heads_shape", np.array([0, 0, heads, hd], np.int64))
    q, k, v = (
        g.op(
            "Transpose",
            [
                g.op(
                    "Reshape",
                    [_linear(g, x, f"{scope}/{p}_proj", hidden, hidden), split],
                    scope=f"{scope}/{p}_proj",
                )
            ],
            scope=f"{scope}/{p}_proj",
            perm=[0, 2, 1, 3],
        )
        for p in ("q", "k", "v")
    )
    cache: list[int | str | None] = ["batch", heads, "past_sequence", hd]
    past_k = g.input(f"past_key_values.{layer}.key", F32, cache)
    past_v = g.input(f"past_key_values.{layer}.value", F32, cache)
    k = g.op("Concat", [past_k, k], scope=scope, axis=2, out=[f"present.{layer}.key"])
    v = g.op("Concat", [past_v, v], scope=scope, axis=2, out=[f"present.{layer}.value"])
    total: list[int | str | None] = ["batch", heads, "total_sequence", hd]
    g.output(f"present.{layer}.key", F32, total)
    g.output(f"present.{layer}.value", F32, total)
    scores = g.op(
        "MatMul", [q, g.op("Transpose", [k], scope=scope, perm=[0, 1, 3, 2])], scope=scope
    )
    scores = g.op("Div", [scores, g.const(f"{scope}.scale", np.float32(np.sqrt(hd)))], scope=scope)
    # causal mask over [new, total]: row i may see keys up to past + i
    two = g.const(f"{scope}.index2", np.array([2], np.int64))
    new = g.op("Gather", [g.op("Shape", [q], scope=scope), two], scope=scope, axis=0)
    tot = g.op("Gather", [g.op("Shape", [k], scope=scope), two], scope=scope, axis=0)
    past = g.op("Squeeze", [g.op("Sub", [tot, new], scope=scope)], scope=scope)
    ones = g.op(
        "ConstantOfShape",
        [g.op("Concat", [new, tot], scope=scope, axis=0)],
        scope=scope,
        value=onnx.helper.make_tensor("one", F32, [1], [1.0]),
    )
    allowed = g.op("Trilu", [ones, past], scope=scope, upper=0)
    bias = g.op(
        "Mul",
        [
            g.op("Sub", [allowed, g.const(f"{scope}.one", np.float32(1))], scope=scope),
            g.const(f"{scope}.neg", np.float32(1e9)),
        ],
        scope=scope,
    )
    probs = g.op("Softmax", [g.op("Add", [scores, bias], scope=scope)], scope=scope, axis=-1)
    ctx = g.op(
        "Transpose", [g.op("MatMul", [probs, v], scope=scope)], scope=scope, perm=[0, 2, 1, 3]
    )
    merge = g.const(f"{scope}.merge_shape", np.array([0, 0, hidden], np.int64))
    ctx = g.op("Reshape", [ctx, merge], scope=scope)
    return _linear(g, ctx, f"{scope}/o_proj", hidden, hidden)


def decoder_tiny(
    layers: int = 2, hidden: int = 256, heads: int = 4, vocab: int = 2048, max_positions: int = 512
) -> onnx.ModelProto:
    """A GPT-style decoder with a key/value cache (random weights): token and position
    embeddings, pre-LayerNorm blocks of causal attention and a Gelu MLP, a language-model head.
    Prefill with ``past_sequence=0``, then decode one token at a time feeding ``present.*``
    back as ``past_key_values.*``: the sequence grows by one per step. Its MatMul weights are
    what weight-only int4 (``quantize(m, mode="int4")``) packs into MatMulNBits."""
    g = GraphBuilder("decoder_tiny")
    ids = g.input("input_ids", I64, ["batch", "sequence"])
    x = g.op(
        "Gather",
        [g.weight("model.embed_tokens.weight", (vocab, hidden), hidden), ids],
        scope="/model/embed_tokens",
    )
    # positions past .. past + sequence - 1, from the cache's length
    past_len = g.op(
        "Gather",
        [
            g.op("Shape", ["past_key_values.0.key"], scope="/model/pos"),
            g.const("pos.index2", np.array(2, np.int64)),
        ],
        scope="/model/pos",
        axis=0,
    )
    seq_len = g.op(
        "Gather",
        [g.op("Shape", [ids], scope="/model/pos"), g.const("pos.index1", np.array(1, np.int64))],
        scope="/model/pos",
        axis=0,
    )
    end = g.op("Add", [past_len, seq_len], scope="/model/pos")
    pos = g.op(
        "Range", [past_len, end, g.const("pos.step", np.array(1, np.int64))], scope="/model/pos"
    )
    pe = g.op(
        "Gather",
        [g.weight("model.embed_positions.weight", (max_positions, hidden), hidden), pos],
        scope="/model/embed_positions",
    )
    x = g.op("Add", [x, pe], scope="/model/embed")
    for i in range(layers):
        s = f"/model/layers.{i}"
        a = _causal_attention(
            g,
            _layer_norm(g, x, f"{s}/input_layernorm", hidden),
            f"{s}/self_attn",
            i,
            hidden=hidden,
            heads=heads,
        )
        x = g.op("Add", [x, a], scope=s)
        h = _layer_norm(g, x, f"{s}/post_attention_layernorm", hidden)
        h = _gelu(g, _linear(g, h, f"{s}/mlp/up_proj", hidden, 4 * hidden), f"{s}/mlp/act")
        x = g.op("Add", [x, _linear(g, h, f"{s}/mlp/down_proj", 4 * hidden, hidden)], scope=s)
    x = _layer_norm(g, x, "/model/norm", hidden)
    g.op(
        "MatMul",
        [x, g.weight("lm_head.weight", (hidden, vocab), hidden)],
        scope="/lm_head",
        out=["logits"],
    )
    g.output("logits", F32, ["batch", "sequence", vocab])
    return g.model()


def nan_guard_cnn() -> onnx.ModelProto:
    """A small CNN with a NaN guard (IsNaN + Where) in the middle. OpenVINO has no IsNaN
    kernel, so with the OpenVINO EP the graph splits into two OpenVINO partitions around one
    CPU node: a real EP fallback island, with its boundary tensors."""
    g = GraphBuilder("nan_guard_cnn")
    x = g.input("input", F32, ["batch", 3, 32, 32])
    x = _conv(g, x, "features.0", (16, 3, 3, 3), scope="/features/0")
    x = g.op("Relu", [x], scope="/features/1")
    nan = g.op("IsNaN", [x], scope="/sanitize")
    x = g.op("Where", [nan, g.const("sanitize.zero", np.float32(0)), x], scope="/sanitize")
    x = _conv(g, x, "features.2", (32, 16, 3, 3), scope="/features/2", strides=[2, 2])
    x = g.op("Relu", [x], scope="/features/3")
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x], scope="/pool")], scope="/pool")
    _logits(g, x, "classifier", (32, 10), "/classifier")
    g.output("logits", F32, ["batch", 10])
    return g.model()


GENERATED: dict[str, tuple[str, Callable[[], onnx.ModelProto]]] = {
    "conv_bn_relu": ("Conv+BatchNorm+Relu x2: folding and activation fusion", conv_bn_relu),
    "mlp": ("3-layer MLP of MatMul+Add: Gemm fusion", mlp),
    "residual_cnn": ("Small ResNet-style CNN: residual Adds, Conv+Relu fusion", residual_cnn),
    "bert_tiny": ("2-layer BERT-style encoder: LayerNorm, Gelu, attention patterns", bert_tiny),
    "nan_guard_cnn": (
        "CNN with an IsNaN guard: OpenVINO splits it around a CPU node",
        nan_guard_cnn,
    ),
    "decoder_tiny": (
        "2-layer GPT-style decoder with a key/value cache: prefill, then one token at a time",
        decoder_tiny,
    ),
}
