"""Bundled real models: ONNX Model Zoo architectures from the onnx wheel, plus generated ones.

The onnx wheel ships Model Zoo graphs (``onnx/backend/test/data/light/light_*.onnx``) whose
weights are ConstantOfShape stubs. :func:`load` replaces each stub by a seeded random
initializer of the right shape (He-initialised convolutions, sane BatchNorm statistics) so the
result is the real architecture, runnable, with finite outputs. Files are cached on disk after
first use. Nothing is downloaded.

The BatchNorm statistics of a Zoo model come from one run of the network in the worker (ORT
runs nowhere else). Generated models exercise ORT's fusions: Conv+BN+Relu, MatMul+Add,
LayerNorm and Gelu patterns, a residual block, and a small BERT-style encoder with
PyTorch-style scoped node names.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ortlab.core import cache
from ortlab.core.builder import F32, I64, GraphBuilder
from ortlab.core.errors import InvalidModelError
from ortlab.core.model import Model
from ortlab.core.model import load as load_model

__all__ = ["describe", "load", "names", "path"]

# Bump when the way a model is generated or filled changes, so caches refresh.
_VERSION = 3

ZOO = {
    "resnet50": "ResNet-50 (ONNX Model Zoo, opset 9): 53 Conv + BatchNorm, residual Sums, 224x224",
    "densenet121": "DenseNet-121 (ONNX Model Zoo): dense blocks of BN-Relu-Conv and Concat",
    "inception_v1": "GoogLeNet / Inception-v1 (ONNX Model Zoo): parallel Conv branches, LRN",
    "inception_v2": "Inception-v2 (ONNX Model Zoo): BN-Inception branches",
    "shufflenet": "ShuffleNet (ONNX Model Zoo): grouped convolutions and channel shuffles",
    "squeezenet": "SqueezeNet 1.0 (ONNX Model Zoo): fire modules, no BatchNorm",
}


def _zoo_file(name: str) -> Path:
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"


def _fill_value(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    op_type: str,
    index: int,
    attrs: dict[str, int],
) -> np.ndarray:
    """A plausible random tensor for input ``index`` of an ``op_type`` node."""
    if op_type == "BatchNormalization":
        base = {1: 1.0, 2: 0.0, 3: 0.0, 4: 1.0}.get(index, 0.0)
        if index == 4:
            return np.asarray(rng.uniform(0.5, 1.5, shape), dtype=np.float32)
        return np.asarray(base + 0.1 * rng.standard_normal(shape), dtype=np.float32)
    if op_type in ("Conv", "ConvTranspose") and index == 1:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        return np.asarray(rng.standard_normal(shape) * np.sqrt(2.0 / fan_in), dtype=np.float32)
    if op_type in ("Gemm", "MatMul") and index == 1 and len(shape) == 2:
        fan_in = shape[1] if attrs.get("transB", 0) else shape[0]
        return np.asarray(rng.standard_normal(shape) * np.sqrt(1.0 / fan_in), dtype=np.float32)
    return np.asarray(0.01 * rng.standard_normal(shape), dtype=np.float32)


def fill_stub_weights(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """Replace ConstantOfShape weight stubs by seeded random initializers (returns a copy)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    rng = np.random.default_rng(seed)
    inits = {t.name: t for t in graph.initializer}
    consumers: dict[str, tuple[onnx.NodeProto, int]] = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            consumers.setdefault(name, (node, i))
    keep, new_inits, dropped = [], [], set()
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input and node.input[0] in inits:
            shape = tuple(int(d) for d in numpy_helper.to_array(inits[node.input[0]]))
            consumer, index = consumers.get(node.output[0], (node, 0))
            attrs = {a.name: a.i for a in consumer.attribute if a.type == onnx.AttributeProto.INT}
            value = _fill_value(rng, shape, consumer.op_type, index, attrs)
            new_inits.append(numpy_helper.from_array(value, node.output[0]))
            dropped.add(node.input[0])
        else:
            keep.append(node)
    del graph.node[:]
    graph.node.extend(keep)
    remaining = [t for t in graph.initializer if t.name not in dropped] + new_inits
    del graph.initializer[:]
    graph.initializer.extend(remaining)
    # Modern exports (IR >= 4) keep weights out of the graph inputs, which lets ORT fold them.
    init_names = {t.name for t in remaining} | dropped
    real_inputs = [v for v in graph.input if v.name not in init_names]
    del graph.input[:]
    graph.input.extend(real_inputs)
    used = {name for node in graph.node for name in node.input}
    final = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(final)
    out.ir_version = max(out.ir_version, 7)
    return out


def calibrate_batchnorm(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """Give each BatchNormalization the statistics its input really has (and a mild affine).

    Random weights make activations grow layer after layer until the softmax saturates or
    overflows; a trained network's BN statistics match its activations. We run the network once
    with every BN swapped for InstanceNormalization (with batch 1, the same per-channel
    normalisation computed from the live input), record each BN input, and store its mean and
    variance: the BN network then reproduces the normalised one exactly on that input.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    bns = [n for n in out.graph.node if n.op_type == "BatchNormalization"]
    if not bns:
        return out
    rng = np.random.default_rng(seed)
    inits = {t.name: t for t in out.graph.initializer}
    for node in bns:
        channels = int(np.prod(inits[node.input[1]].dims))
        for index, value in (
            (1, 1.0 + 0.1 * rng.standard_normal(channels)),
            (2, 0.1 * rng.standard_normal(channels)),
        ):
            inits[node.input[index]].CopyFrom(
                numpy_helper.from_array(value.astype(np.float32), node.input[index])
            )
    probe = onnx.ModelProto()
    probe.CopyFrom(out)
    for node in probe.graph.node:
        if node.op_type == "BatchNormalization":
            eps = [a for a in node.attribute if a.name == "epsilon"]
            node.op_type = "InstanceNormalization"
            del node.input[3:]
            del node.attribute[:]
            node.attribute.extend(eps)
    probe.graph.output.extend(helper.make_empty_tensor_value_info(n.input[0]) for n in bns)
    feeds = {
        i.name: rng.standard_normal(
            [1, *[d.dim_value or 1 for d in i.type.tensor_type.shape.dim][1:]]
        ).astype(np.float32)
        for i in out.graph.input
    }
    from ortlab.engine.worker import in_worker

    task = {
        "model": probe.SerializeToString(),
        "outputs": [n.input[0] for n in bns],
        "feeds": feeds,
    }
    values = in_worker(run_cpu, task, timeout=600.0, context="calibrating a bundled model")
    for node, x in zip(bns, values, strict=True):
        axes = tuple(i for i in range(x.ndim) if i != 1)
        x64 = x.astype(np.float64)
        for index, stat in ((3, x64.mean(axis=axes)), (4, x64.var(axis=axes))):
            inits[node.input[index]].CopyFrom(
                numpy_helper.from_array(stat.astype(np.float32), node.input[index])
            )
    return out


def run_cpu(
    progress: object, model: bytes, outputs: list[str], feeds: dict[str, np.ndarray]
) -> list[np.ndarray]:
    """(worker task) ``outputs`` of ``model`` at ``feeds`` on the CPU EP."""
    import onnxruntime as ort

    del progress
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    return list(sess.run(outputs, feeds))


# ---------------------------------------------------------------- generated models


def conv_bn_relu() -> onnx.ModelProto:
    """Conv -> BatchNormalization -> Relu, twice: ORT folds BN (basic), fuses Relu (extended)."""
    g = GraphBuilder("conv_bn_relu")
    x = g.input("input", F32, ["batch", 3, 32, 32])
    for i, (cin, cout) in enumerate(((3, 16), (16, 32))):
        scope = f"/features/block{i}"
        w = g.weight(f"features.block{i}.conv.weight", (cout, cin, 3, 3), fan_in=cin * 9)
        x = g.op("Conv", [x, w], scope=scope, pads=[1, 1, 1, 1])
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
    x = g.op(
        "Conv",
        [
            x,
            g.weight("stem.weight", (32, 3, 3, 3), 27),
            g.const("stem.bias", np.zeros(32, np.float32)),
        ],
        scope="/stem",
        pads=[1, 1, 1, 1],
        strides=[2, 2],
    )
    x = g.op("Relu", [x], scope="/stem")
    for i in range(2):
        s = f"/layer{i}"
        h = g.op(
            "Conv",
            [x, g.weight(f"layer{i}.conv1.weight", (32, 32, 3, 3), 288)],
            scope=s + "/conv1",
            pads=[1, 1, 1, 1],
        )
        h = g.op("Relu", [h], scope=s + "/conv1")
        h = g.op(
            "Conv",
            [h, g.weight(f"layer{i}.conv2.weight", (32, 32, 3, 3), 288)],
            scope=s + "/conv2",
            pads=[1, 1, 1, 1],
        )
        x = g.op("Relu", [g.op("Add", [h, x], scope=s)], scope=s)
    x = g.op("GlobalAveragePool", [x], scope="/head")
    x = g.op("Flatten", [x], scope="/head")
    g.op(
        "Gemm",
        [x, g.weight("fc.weight", (32, 10)), g.const("fc.bias", np.zeros(10, np.float32))],
        scope="/head",
        out=["logits"],
    )
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
    x = g.op(
        "Conv",
        [
            x,
            g.weight("features.0.weight", (16, 3, 3, 3), 27),
            g.const("features.0.bias", np.zeros(16, np.float32)),
        ],
        scope="/features/0",
        pads=[1, 1, 1, 1],
    )
    x = g.op("Relu", [x], scope="/features/1")
    nan = g.op("IsNaN", [x], scope="/sanitize")
    x = g.op("Where", [nan, g.const("sanitize.zero", np.float32(0)), x], scope="/sanitize")
    x = g.op(
        "Conv",
        [
            x,
            g.weight("features.2.weight", (32, 16, 3, 3), 144),
            g.const("features.2.bias", np.zeros(32, np.float32)),
        ],
        scope="/features/2",
        pads=[1, 1, 1, 1],
        strides=[2, 2],
    )
    x = g.op("Relu", [x], scope="/features/3")
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x], scope="/pool")], scope="/pool")
    g.op(
        "Gemm",
        [
            x,
            g.weight("classifier.weight", (32, 10)),
            g.const("classifier.bias", np.zeros(10, np.float32)),
        ],
        scope="/classifier",
        out=["logits"],
    )
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


def names() -> list[str]:
    """Names accepted by :func:`load`: zoo architectures first, then generated models."""
    return [n for n in ZOO if _zoo_file(n).exists()] + list(GENERATED)


def describe() -> dict[str, str]:
    return {n: ZOO[n] if n in ZOO else GENERATED[n][0] for n in names()}


def path(name: str, seed: int = 0) -> Path:
    """The cached file of example ``name``, built on first use."""
    key = name.lower().removeprefix("light_")
    if key not in ZOO and key not in GENERATED:
        raise InvalidModelError(
            f"No bundled example named {name!r}. Available: {', '.join(names())}."
        )
    target = cache.subdir("examples") / f"{key}-s{seed}-v{_VERSION}-onnx{onnx.__version__}.onnx"
    if target.exists():
        return target
    if key in ZOO:
        src = _zoo_file(key)
        if not src.exists():
            raise InvalidModelError(
                f"The onnx wheel installed here ({onnx.__version__}) does not ship {src.name}. "
                f"Available: {', '.join(names())}."
            )
        proto = calibrate_batchnorm(fill_stub_weights(onnx.load(str(src)), seed=seed), seed)
        proto.producer_name = "ortlab.examples (ONNX Model Zoo architecture, random weights)"
    else:
        proto = GENERATED[key][1]()
    cache.write_atomic(target, proto.SerializeToString())
    return target


def load(name: str, seed: int = 0) -> Model:
    """Load a bundled example as a :class:`~ortlab.Model` (``source='example:<name>'``)."""
    model = load_model(path(name, seed), name=name.lower().removeprefix("light_"))
    return Model(
        proto=model.proto, path=model.path, source=f"example:{model.name}", summary=model.summary
    )
