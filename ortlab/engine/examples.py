"""Bundled real models by name: ONNX Model Zoo architectures from the onnx wheel, plus the
generated ones (:mod:`ortlab.engine.example_models`), each cached on disk as a file.

The onnx wheel ships Model Zoo graphs (``onnx/backend/test/data/light/light_*.onnx``) whose
weights are ConstantOfShape stubs. :func:`load` replaces each stub by a seeded random
initializer of the right shape (He-initialised convolutions, sane BatchNorm statistics) so the
result is the real architecture, runnable, with finite outputs. Files are cached on disk after
first use. Nothing is downloaded.

The BatchNorm statistics of a Zoo model come from one run of the network in the worker (ORT
runs nowhere else). The generated models, built in :mod:`ortlab.engine.example_models` and
re-exported here (``ortlab.examples.mlp()``), exercise ORT's fusions: Conv+BN+Relu,
MatMul+Add, LayerNorm and Gelu patterns, a residual block, a small BERT-style encoder with
PyTorch-style scoped node names and a decoder with a key/value cache.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ortlab.core import cache
from ortlab.core.errors import InvalidModelError
from ortlab.core.model import Model
from ortlab.core.model import load as load_model
from ortlab.engine.example_models import (
    GENERATED,
    bert_tiny,
    conv_bn_relu,
    decoder_tiny,
    mlp,
    nan_guard_cnn,
    residual_cnn,
)

__all__ = [
    "GENERATED",
    "ZOO",
    "bert_tiny",
    "conv_bn_relu",
    "decoder_tiny",
    "describe",
    "folder_of",
    "load",
    "mlp",
    "names",
    "nan_guard_cnn",
    "path",
    "residual_cnn",
]

DECODERS = {
    "tiny_llama_int4": (
        "genai_int4",
        "LLM decoder: a 2-layer Llama made by onnxruntime-genai's builder (GroupQueryAttention, "
        "int4 MatMulNBits, KV cache; random weights)",
    ),
    "tiny_llama_fp32": (
        "genai_fp32",
        "LLM decoder: the same Llama from onnxruntime-genai's builder in fp32 (weights in "
        "external data)",
    ),
    "tiny_gpt2_merged": (
        "optimum_gpt2_merged",
        "LLM decoder: a 2-layer GPT-2 exported and merged by optimum (the whole network in an "
        "If on use_cache_branch)",
    ),
    "tiny_llama_optimum": (
        "optimum_llama",
        "LLM decoder: the Llama exported by optimum with past/present pairs",
    ),
    "tiny_whisper": (
        "optimum_whisper",
        "encoder-decoder: a Whisper (2 + 2 layers, 1500 encoder frames) exported by optimum; "
        "loads its decoder (decoder_model_merged.onnx), the encoder beside it",
    ),
    "tiny_whisper_genai": (
        "genai_whisper",
        "a folder of two models: a Whisper (2 + 2 layers) made by onnxruntime-genai's builder; "
        "loads its text decoder (decoder.onnx), whose cross-attention K/V the audio encoder "
        "(encoder.onnx, part='encoder') computes",
    ),
    "tiny_t5": (
        "optimum_t5",
        "encoder-decoder: a T5 (2 + 2 layers, relative position buckets) exported by optimum; "
        "its decoder reads the encoder's attention mask",
    ),
    "tiny_gemma2_int4": (
        "genai_gemma2_int4",
        "LLM decoder: a 4-layer Gemma 2 made by onnxruntime-genai's builder, int4: layers 0 and 2 "
        "read a sliding window of 8 tokens from a fixed 8-slot cache buffer, 1 and 3 are global "
        "(random weights)",
    ),
    "tiny_lfm2_int4": (
        "genai_lfm2_int4",
        "LLM decoder: a 4-layer LFM2 hybrid made by onnxruntime-genai's builder, int4: layers 0 "
        "and 2 carry a convolution state (past.N.conv), 1 and 3 a KV cache (random weights)",
    ),
    "tiny_gptoss_fp32": (
        "genai_gptoss_fp32",
        "LLM decoder: a 2-layer gpt-oss mixture of experts made by onnxruntime-genai's builder, "
        "fp32: 4 experts, 2 per token (MoE op), a sliding-window layer and a global one (random "
        "weights)",
    ),
    "tiny_llama_dynamo": (
        "dynamo_llama",
        "LLM decoder: the Llama exported by torch.onnx.export(dynamo=True), model.onnx alone "
        "(no config; node names carry no layer index: layers and heads come from the graph)",
    ),
}
"""Tiny decoders made by the real exporters (ortlab/decoders, scripts/make_decoders.py):
folders with their genai_config.json or config.json (dynamo's: its model.onnx alone), loaded
in place."""
DECODER_DIR = Path(__file__).resolve().parents[1] / "decoders"

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


def names() -> list[str]:
    """Names accepted by :func:`load`: zoo architectures first, then generated models."""
    return [n for n in ZOO if _zoo_file(n).exists()] + list(GENERATED) + list(DECODERS)


def describe() -> dict[str, str]:
    return {
        n: ZOO[n] if n in ZOO else DECODERS[n][1] if n in DECODERS else GENERATED[n][0]
        for n in names()
    }


def path(name: str, seed: int = 0) -> Path:
    """The cached file of example ``name``, built on first use."""
    key = name.lower().removeprefix("light_")
    if key in DECODERS:  # a folder with its configs: its model file, in place
        from ortlab.core.decoder import decoder_file

        folder = DECODER_DIR / DECODERS[key][0]
        found = decoder_file(folder) or next(iter(sorted(folder.glob("*.onnx"))), None)
        if found is None:
            raise InvalidModelError(f"The bundled decoder {name!r} is missing from {DECODER_DIR}.")
        return found
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


def folder_of(name: str) -> Path:
    """The folder of bundled decoder ``name`` (its configs and every model it holds)."""
    key = name.lower().removeprefix("light_")
    if key not in DECODERS:
        decoders = ", ".join(sorted(DECODERS))
        raise InvalidModelError(
            f"{name!r} is no bundled model folder: a part is one of a folder's models. "
            f"The bundled folders: {decoders}."
        )
    return DECODER_DIR / DECODERS[key][0]


def load(name: str, seed: int = 0) -> Model:
    """Load a bundled example as a :class:`~ortlab.Model` (``source='example:<name>'``); a
    bundled decoder from its folder (its summary names the folder's models)."""
    from ortlab.core.decoder import decoder_file

    key = name.lower().removeprefix("light_")
    folder = DECODER_DIR / DECODERS[key][0] if key in DECODERS else None
    named = folder is not None and folder.is_dir() and decoder_file(folder) is not None
    model = load_model(folder if named and folder else path(name, seed), name=key)
    return Model(
        proto=model.proto, path=model.path, source=f"example:{model.name}", summary=model.summary
    )
