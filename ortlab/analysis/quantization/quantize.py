"""Quantization and precision variants: build them, compare them, and locate their error.

Variants are written to ortlab's cache, never over the input. ORT's pre-processing runs first
(with the known fallback when symbolic shape inference fails) and each variant says which steps
ran. Calibration data comes from the user (iterable of feeds, a DataFrame, a folder of .npy/.npz
files) or is synthesized — and then every accuracy figure computed from it is marked synthetic.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ortlab.core import cache
from ortlab.core.errors import FeedError, QuantizationError
from ortlab.core.feedcheck import validate_feeds
from ortlab.core.inputs import shapes_text
from ortlab.core.model import Model, ModelLike, load
from ortlab.core.onnx_util import compute_in_bodies
from ortlab.core.quantconfig import QuantConfig
from ortlab.engine import tasks_transform
from ortlab.engine.calls import Via
from ortlab.engine.calls import run as run_task

if TYPE_CHECKING:
    from ortlab.core.inputs import FeedsLike
    from ortlab.core.result import Table

__all__ = ["QuantConfig", "QuantizationError", "calibration_data", "quantize", "to_fp16"]

QUANTIZED_OPS = frozenset(
    {  # in a model: already quantized; among executed kernels: int8 work that ran
        "QLinearMul",
        "QLinearConcat",
        "QLinearGlobalAveragePool",
        "QLinearAveragePool",
        "QLinearSigmoid",
        "QLinearLeakyRelu",
        "QuantizeLinear",
        "DequantizeLinear",
        "QLinearConv",
        "QLinearMatMul",
        "MatMulInteger",
        "ConvInteger",
        "DynamicQuantizeLinear",
        "QGemm",
        "QLinearAdd",
        "DynamicQuantizeMatMul",
        "MatMulIntegerToFloat",
        "QAttention",
    }
)
_ALREADY_QUANTIZED = QUANTIZED_OPS | {
    "DynamicQuantizeLSTM",
    "MatMulNBits",
    "QOrderedMatMul",
    "MatMulBnb4",
    "GatherBlockQuantized",
}
"""Ops that mark a model as quantized already (a domain prefix is dropped before the test)."""


_SINGLE_FILE_LIMIT = 2**31 - 2**24
"""Weights up to this fit one protobuf (2 GiB, less room for the graph itself)."""


def float16_weights(model: Model) -> str:
    """'' for a float32 model; else what makes it float16 ("412 of 418 float initializers",
    "input 'x' is float16"), read from the file without loading weights."""
    from onnx import TensorProto

    from ortlab.core.onnx_util import walk_initializers

    kinds = [
        t.data_type
        for t in walk_initializers(model.proto.graph)
        if t.data_type in (TensorProto.FLOAT, TensorProto.FLOAT16)
    ]
    half = sum(k == TensorProto.FLOAT16 for k in kinds)
    if kinds and half * 2 > len(kinds):
        return f"{half} of {len(kinds)} float initializers"
    inputs = [i.name for i in model.inputs if i.dtype == "float16"]
    return f"input {inputs[0]!r} is float16" if inputs else ""


def quantized_ops(model: Model) -> list[str]:
    """The ops that make ``model`` quantized already (a domain prefix is dropped for the test)."""
    return sorted(o for o in model.summary.op_types if o.rsplit(".", 1)[-1] in _ALREADY_QUANTIZED)


def precision_label(model: Model) -> str:
    """What a model's weights are, for a comparison's baseline row: ``fp32``, ``fp16`` or
    ``int8`` (quantized ops present: ConvInteger, QLinearConv, MatMulNBits…). Never "fp32" for
    a model whose weights are already int8."""
    if quantized_ops(model):
        return "int8"
    return "fp16" if float16_weights(model) else "fp32"


QUANTIZABLE_OPS = frozenset(
    {
        "Conv",
        "MatMul",
        "Gemm",
        "ConvTranspose",
        "Attention",
        "LSTM",
        "GRU",
        "Gather",
        "EmbedLayerNormalization",
    }
)


@dataclass(frozen=True)
class Calibration:
    samples: list[dict[str, np.ndarray]]
    synthetic: bool
    source: str
    """What the samples are, with their shapes: every accuracy figure quotes it."""


def _from_folder(model: Model, folder: Path, limit: int) -> list[dict[str, np.ndarray]]:
    files = sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".npz"))
    if not files:
        raise QuantizationError(
            f"No .npy/.npz files in {folder}. Store one .npz per sample (arrays named like the "
            f"inputs: {[t.name for t in model.inputs]}), or one .npy per sample for a "
            "single-input model."
        )
    samples = []
    for p in files[:limit]:
        if p.suffix == ".npz":
            with np.load(p, allow_pickle=False) as z:
                samples.append({k: z[k] for k in z.files})
        elif len(model.inputs) == 1:
            samples.append({model.inputs[0].name: np.load(p, allow_pickle=False)})
        else:
            raise QuantizationError(
                f"{p.name} is a .npy but {model.name!r} has {len(model.inputs)} inputs: store "
                "each sample as a .npz with one array per input name."
            )
    return samples


def calibration_data(
    model: Model,
    source: object = None,
    limit: int = 32,
    seed: int = 1,
    *,
    dims: Mapping[str, int] | None = None,
    like: FeedsLike | None = None,
) -> Calibration:
    """Samples for calibration or evaluation, validated against the model.

    ``source``: None (synthesized, marked synthetic), an iterable/generator of feeds dicts, a
    pandas DataFrame (one column per input, one row per sample), or a folder of .npy/.npz.
    Synthesized samples take their shapes from ``like`` (the feeds the model is timed with:
    accuracy is measured at the shapes that are timed) or else from ``dims``; feeds the caller
    gave (not made by ortlab) are the first sample."""
    if source is None:
        return _synthesized(model, min(limit, 8), seed, dims, like)
    if isinstance(source, SavedCalibration):  # a variant's own samples: the same provenance
        return Calibration(load_samples(source.path), source.synthetic, source.source)
    if isinstance(source, str | Path) and Path(source).is_dir():
        samples = _from_folder(model, Path(source), limit)
        origin = f"folder {source}"
    elif hasattr(source, "to_dict") and hasattr(source, "columns"):  # a DataFrame
        frame: Table = source
        samples = [
            {c: np.asarray(row[c]) for c in frame.columns}
            for _, row in frame.head(limit).iterrows()
        ]
        origin = "DataFrame"
    elif isinstance(source, Mapping):
        samples = [dict(source)]
        origin = "one feeds dict"
    elif isinstance(source, Iterable):
        samples = []
        for item in source:
            samples.append(dict(item))
            if len(samples) >= limit:
                break
        origin = type(source).__name__
    else:
        raise QuantizationError(
            f"Calibration data must be feeds dicts (an iterable or generator), a DataFrame or a "
            f"folder of .npy/.npz files, not {type(source).__name__}."
        )
    if not samples:
        raise QuantizationError(
            f"The calibration set ({origin}) is empty: static quantization needs at least one "
            "sample to measure activation ranges. Pass a few representative inputs."
        )
    for i, s in enumerate(samples):
        try:
            samples[i] = dict(validate_feeds(model, s))
        except FeedError as err:
            raise QuantizationError(f"Calibration sample {i} ({origin}): {err}") from err
    return Calibration(
        samples, False, f"{len(samples)} samples from {origin} ({shapes_text(samples[0])})"
    )


def _synthesized(
    model: Model,
    count: int,
    seed: int,
    dims: Mapping[str, int] | None,
    like: FeedsLike | None,
) -> Calibration:
    """``count`` seeded random samples at the shapes of ``like`` (or ``dims``); the caller's
    own feeds first when ``like`` holds them."""
    samples: list[dict[str, np.ndarray]] = []
    if like is not None and not getattr(like, "synthetic", False):
        samples.append(dict(validate_feeds(model, like)))
    given = bool(samples)
    while len(samples) < count:
        samples.append(dict(model.example_inputs(dims, seed=seed + len(samples), like=like)))
    made = len(samples) - (1 if given else 0)
    what = (
        f"the feeds given + {made} synthetic samples made from them (float arrays perturbed "
        "within their range, scalars, state and non-float inputs copied)"
        if given
        else f"{made} synthetic samples (random inputs)"
    )
    return Calibration(samples, True, f"{what}; {shapes_text(samples[0])}")


@dataclass(frozen=True)
class SavedCalibration:
    """The calibration samples a variant was made with (``VariantInfo.calibration_file``),
    as a ``calibration=`` source: re-quantizing with them compares like with like."""

    path: str
    source: str
    synthetic: bool

    @classmethod
    def of(cls, info: VariantInfo) -> SavedCalibration | None:
        if not info.calibration_file or not Path(info.calibration_file).exists():
            return None
        return cls(info.calibration_file, info.calibration, info.synthetic_calibration)


@dataclass(frozen=True)
class VariantInfo:
    """How a model variant was produced (attached to the Model it returns)."""

    label: str
    base: str
    config: QuantConfig
    """What made it (without its calibration data: ``calibration`` says what that was)."""
    steps: list[str]
    calibration: str
    synthetic_calibration: bool
    log: list[str] = field(default_factory=list)
    calibration_file: str = ""
    """The calibration samples it was made with (a .npz in ortlab's cache; '' when none were
    needed): a re-quantization that must compare like with like (``ErrorResult.fix``) uses
    exactly these."""


def _check_quantizable(model: Model, config: QuantConfig) -> None:
    """Refuse, before any work, what cannot make a model onnxruntime runs: a second
    quantization of a quantized model, fp16 of an fp16 model, int8 from float16 weights."""
    ops = model.summary.op_types
    already = quantized_ops(model)
    if already:
        raise QuantizationError(
            f"{model.name!r} is already quantized ({', '.join(already)} present): "
            f"{'an fp16' if config.mode == 'fp16' else 'another'} variant of it is not a model "
            "onnxruntime can run. Quantize the float32 model instead; ortlab.compare() can then "
            "set both side by side."
        )
    half = float16_weights(model)
    if half and config.mode == "fp16":
        raise QuantizationError(
            f"{model.name!r} is already float16 ({half}): converting it again makes nothing "
            "new. Compare it with its float32 original, or quantize that one to int8."
        )
    if half and config.mode in ("static", "dynamic", "int4"):
        raise QuantizationError(
            f"{model.name!r} holds float16 weights ({half}); onnxruntime's quantizer takes "
            "float32 models (from float16 it writes files onnxruntime refuses). Quantize the "
            "float32 original."
        )
    inside = compute_in_bodies(model.proto.graph)
    if inside and config.mode == "static":
        raise QuantizationError(
            f"{inside} of {model.name!r}'s MatMul/Gemm/Conv nodes sit inside If/Loop/Scan "
            "bodies (an optimum merged decoder keeps its whole network in an If), which "
            "onnxruntime's static quantizer does not enter: its variant would hold no "
            "quantized op. Use mode='dynamic' (onnxruntime quantizes bodies in that mode)."
        )
    targets = set(config.op_types) or QUANTIZABLE_OPS
    if config.mode != "fp16" and not targets & set(ops):
        raise QuantizationError(
            f"{model.name!r} has no op ORT quantizes ({', '.join(sorted(targets))}): its ops are "
            f"{', '.join(list(ops)[:12])}. Quantization would change nothing."
        )
    if model.summary.initializer_bytes >= _SINGLE_FILE_LIMIT:
        raise QuantizationError(
            f"{model.name!r} holds {model.summary.initializer_bytes / 2**30:.2f} GiB of "
            "weights: ORT's quantizer reads a model as one protobuf, which cannot pass 2 GiB. "
            "Quantize with onnxruntime.quantization directly (use_external_data_format=True), "
            "or quantize the model in parts."
        )


def quantize(
    model: ModelLike,
    config: QuantConfig | None = None,
    *,
    dims: Mapping[str, int] | None = None,
    feeds: FeedsLike | None = None,
    timeout: float | None = None,
    **options: object,
) -> Model:
    """A quantized (or fp16) variant of ``model``, written to ortlab's cache (``timeout``:
    the most seconds the worker may take, default ortlab's).

    ``ortlab.quantize(m, mode="dynamic")`` is short for ``quantize(m, QuantConfig(mode=…))``;
    with ``config`` too, the keywords change its settings.
    Without calibration data, static calibration samples are synthesized at the shapes of
    ``feeds`` (or ``dims``): the shapes the model will run at. The returned Model's
    ``variant`` says which steps ran and whether calibration was synthetic.
    """

    m = load(model)
    cfg = QuantConfig.of(config, options)
    _check_quantizable(m, cfg)
    like = validate_feeds(m, feeds) if feeds is not None else None
    calib = (
        calibration_data(m, cfg.calibration, cfg.calibration_size, dims=dims, like=like)
        if cfg.mode == "static"
        else Calibration([], False, "none needed")
    )
    key = json.dumps(  # "opened": only variants onnxruntime opened are cached (since 0.2)
        [m.fingerprint(), cfg.settings(), calib.source, _digest(calib.samples), "opened"],
        sort_keys=True,
    )
    out_path = (
        cache.subdir("variants")
        / f"{m.name[:40]}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.onnx"
    )
    if out_path.exists() and out_path.with_suffix(".json").exists():  # both written: reuse
        steps = json.loads(out_path.with_suffix(".json").read_text())["steps"]
        log: list[str] = []
    else:
        out = run_task(
            tasks_transform.quantize,
            Via(
                desc=f"quantize {m.name}",
                context=f"of {m.name!r} ({cfg.label()})",
                progress=False,
                timeout=timeout,
            ),
            model_path=str(m.path),
            out_path=str(out_path),
            config=cfg.without_data(),
            samples=calib.samples,
        )
        steps, log = out.steps, out.log
        out_path.with_suffix(".json").write_text(json.dumps({"steps": steps}))
    calib_file = out_path.with_suffix(".calib.npz")
    if calib.samples and not calib_file.exists():
        save_samples(calib_file, calib.samples)
    q = load(out_path, name=f"{m.name} [{cfg.label()}]")
    info = VariantInfo(
        label=cfg.label(),
        base=m.name,
        config=cfg.without_data(),
        steps=steps,
        calibration=calib.source,
        synthetic_calibration=calib.synthetic,
        log=log,
        calibration_file=str(calib_file) if calib.samples else "",
    )
    return replace(q, source=f"variant:{cfg.label()}", variant=info)


def save_samples(path: Path, samples: Sequence[Mapping[str, np.ndarray]]) -> None:
    """Calibration samples as one .npz (``<index>/<input name>`` keys, no pickling)."""
    arrays = {
        f"{i}/{name}": np.asarray(v)
        for i, sample in enumerate(samples)
        for name, v in sample.items()
    }
    tmp = path.with_name(path.name + ".part")
    with tmp.open("wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]
    tmp.replace(path)


def load_samples(path: str | Path) -> list[dict[str, np.ndarray]]:
    """What :func:`save_samples` wrote, in order."""
    out: dict[int, dict[str, np.ndarray]] = {}
    with np.load(path, allow_pickle=False) as data:
        for key in data.files:
            i, _, name = key.partition("/")
            out.setdefault(int(i), {})[name] = data[key]
    return [out[i] for i in sorted(out)]


def to_fp16(
    model: ModelLike, keep_io_types: bool = True, op_block_list: Iterable[str] = ()
) -> Model:
    """An fp16 variant (ORT's float16 converter), float32 inputs/outputs kept by default."""
    return quantize(
        model,
        QuantConfig(mode="fp16", keep_io_types=keep_io_types, op_block_list=tuple(op_block_list)),
    )


def _digest(samples: list[dict[str, np.ndarray]]) -> str:
    h = hashlib.sha256()
    for s in samples:
        for k in sorted(s):
            h.update(k.encode())
            h.update(np.ascontiguousarray(s[k]).tobytes())
    return h.hexdigest()[:16]
