"""Worker tasks that transform models: quantization, fp16, the transformers optimizer, and
intermediate activations for error analysis (see ortlab.tasks for the conventions)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ortlab.core import cache
from ortlab.core.errors import OrtlabError, QuantizationError, error_text
from ortlab.core.quantconfig import QuantConfig
from ortlab.core.run import Progress
from ortlab.engine.capture import capture_output
from ortlab.engine.errorsums import Side, fold_groups
from ortlab.engine.replies import QuantizeReply, TensorStats, TransformerReply
from ortlab.engine.session import clean_ort_message
from ortlab.engine.tasks import prepare_feeds

if TYPE_CHECKING:
    from onnxruntime.transformers.onnx_model import OnnxModel


class _Reader:
    """A CalibrationDataReader over a list of feeds (ORT's interface: get_next / rewind)."""

    def __init__(self, samples: list[dict[str, np.ndarray]]) -> None:
        self.samples = samples
        self.index = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self.index >= len(self.samples):
            return None
        self.index += 1
        return self.samples[self.index - 1]

    def rewind(self) -> None:
        self.index = 0


def quantize(
    progress: Progress,
    *,
    model_path: str,
    out_path: str,
    config: QuantConfig,
    samples: list[dict[str, np.ndarray]],
) -> QuantizeReply:
    """ORT pre-processing (with the known fallback), then dynamic/static quantization or fp16."""

    steps: list[str] = []
    mode = config.mode
    with cache.temp_dir("quantize-") as folder, capture_output() as cap:
        external = _inline_external(model_path, str(folder / "inline.onnx"), steps)
        source = external or model_path
        source = _opset_for_quantization(source, str(folder / "opset.onnx"), mode, steps)
        if config.preprocess and mode not in ("fp16", "int4"):
            source = _preprocess(source, str(folder / "pre.onnx"), steps)
        progress(1, 3)
        try:
            _convert(source, out_path, config, samples, steps)
        except QuantizationError:
            raise
        except Exception as err:  # ORT's quantizer raises ValueError, AssertionError, …
            raise QuantizationError(
                f"ORT's quantizer failed making the {config.label()} variant: "
                f"{error_text(err)}. Steps so far: {'; '.join(steps) or 'none'}. Try another "
                "mode or format (e.g. per_channel=False, mode='dynamic'), or exclude op types "
                "with QuantConfig(op_types=...)."
            ) from err
        if external:
            _data_beside(out_path, steps)
        if mode in ("dynamic", "static", "int4") and not _quantized_ops(out_path):
            raise QuantizationError(
                f"ORT's quantizer made a {config.label()} variant with no quantized op: "
                "nothing it quantizes was found (op types, excluded nodes, or weights it does "
                "not take). Steps: " + "; ".join(steps)
            )
        check_loads(out_path, f"the {config.label()} variant", remove=True)
        steps.append("checked: onnxruntime opens the variant (CPU, level all)")
        progress(3, 3)
    return QuantizeReply(steps=steps, log=cap.lines()[-50:])


def _inline_external(model_path: str, out: str, steps: list[str]) -> str:
    """A model whose weights are in external data, read into one file for ORT's quantizer
    (which reads and writes single files); '' when the model keeps its weights inside."""
    import onnx

    from ortlab.core.onnx_util import walk_initializers

    head = onnx.load(model_path, load_external_data=False)
    if not any(t.data_location == onnx.TensorProto.EXTERNAL for t in walk_initializers(head.graph)):
        return ""
    del head
    model = onnx.load(model_path)  # its external data, from beside it
    onnx.save_model(model, out)
    steps.append(
        "external data read into one file for ORT's quantizer (the variant keeps "
        "its weights beside it, as the original does)"
    )
    return out


def _data_beside(out_path: str, steps: list[str]) -> None:
    """Store the variant's weights as external data beside it (``<name>.data``), like the
    original model's."""
    from pathlib import Path

    import onnx

    location = Path(out_path).name + ".data"
    model = onnx.load(out_path)
    (Path(out_path).parent / location).unlink(missing_ok=True)  # onnx appends to it
    onnx.save_model(
        model,
        out_path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=location,
        size_threshold=1024,
    )
    steps.append(f"weights written beside the variant as external data ({location})")


def check_loads(path: str, what: str, *, remove: bool = False) -> None:
    """Open a CPU session on ``path`` (the level users run at) and say clearly when
    onnxruntime refuses it; ``remove`` deletes the refused file, so no cache holds a model
    that cannot load."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    except Exception as err:
        if remove:
            from pathlib import Path

            Path(path).unlink(missing_ok=True)
            Path(path + ".data").unlink(missing_ok=True)
        raise QuantizationError(
            f"onnxruntime cannot open {what}: {clean_ort_message(error_text(err))}. ortlab "
            "does not return a model that cannot run. Try another mode (e.g. mode='dynamic' "
            "or 'int4'), keep the op types that fail in float (QuantConfig(op_types=...) or "
            "op_block_list=...), or start from the float32 model."
        ) from err
    del sess


def _convert(
    source: str,
    out_path: str,
    config: QuantConfig,
    samples: list[dict[str, np.ndarray]],
    steps: list[str],
) -> None:
    import onnx

    mode = config.mode
    if mode == "int4":
        _int4(source, out_path, config, steps)
    elif mode == "fp16":
        from onnxruntime.transformers.float16 import convert_float_to_float16

        model = convert_float_to_float16(
            onnx.load(source),
            keep_io_types=config.keep_io_types,
            op_block_list=list(config.op_block_list) or None,
        )
        onnx.save_model(model, out_path)
        steps.append(
            "fp16: onnxruntime.transformers.float16.convert_float_to_float16"
            f" (keep_io_types={config.keep_io_types})"
        )
    elif mode == "dynamic":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(
            source,
            out_path,
            op_types_to_quantize=list(config.op_types) or None,
            per_channel=config.per_channel,
            weight_type=getattr(QuantType, config.weight_type),
            nodes_to_exclude=list(config.nodes_to_exclude) or None,
            extra_options={"EnableSubgraph": True},  # an If's branches too (merged decoders)
        )
        steps.append("quantize_dynamic (If/Loop/Scan bodies included)")
    else:
        _static(source, out_path, config, samples, steps)


_QUANTIZED = frozenset(
    {
        "MatMulInteger",
        "DynamicQuantizeLinear",
        "QuantizeLinear",
        "DequantizeLinear",
        "QLinearConv",
        "QLinearMatMul",
        "MatMulNBits",
        "DynamicQuantizeMatMul",
        "MatMulIntegerToFloat",
        "ConvInteger",
        "QGemm",
    }
)


def _compute_in_bodies(path: str) -> int:
    import onnx

    from ortlab.core.onnx_util import compute_in_bodies

    return compute_in_bodies(onnx.load(path, load_external_data=False).graph)


def _quantized_ops(path: str) -> int:
    """Quantized or dequantizing ops anywhere in the model, bodies included."""
    import onnx

    from ortlab.core.onnx_util import walk_nodes

    graph = onnx.load(path, load_external_data=False).graph
    return sum(1 for n, _ in walk_nodes(graph) if n.op_type in _QUANTIZED)


def _int4(source: str, out_path: str, config: QuantConfig, steps: list[str]) -> None:
    """Weight-only int4: MatMul weights packed into MatMulNBits blocks (activations float)."""
    import onnx

    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    except ImportError as err:  # it imports onnx_ir, which onnxruntime does not require
        raise QuantizationError(
            f"int4 needs ORT's matmul_nbits_quantizer, which failed to import ({err}). Install "
            "the onnx-ir package (pip install onnx-ir); ortlab declares it as a dependency."
        ) from err
    quantizer = MatMulNBitsQuantizer(
        onnx.load(source),
        bits=4,
        block_size=int(config.block_size),
        is_symmetric=bool(config.symmetric),
        accuracy_level=config.accuracy_level,
        nodes_to_exclude=list(config.nodes_to_exclude) or None,
    )
    quantizer.process()
    from ortlab.core.onnx_util import walk_nodes

    graph = quantizer.model.model.graph
    packed = sum(n.op_type == "MatMulNBits" for n, _ in walk_nodes(graph))  # bodies too
    if not packed:
        inside = _compute_in_bodies(source)
        raise QuantizationError(
            "int4 found no MatMul with a constant weight to pack (MatMulNBits takes MatMul "
            "nodes whose second input is an initializer with K divisible into blocks)."
            + (
                f" {inside} MatMul/Gemm/Conv nodes sit inside If/Loop/Scan bodies, whose "
                "weights (in the outer graph) the int4 quantizer does not take: "
                "mode='dynamic' quantizes them."
                if inside
                else ""
            )
        )
    quantizer.model.save_model_to_file(out_path, use_external_data_format=False)
    steps.append(
        f"matmul_nbits_quantizer: {packed} MatMul weights to 4 bits, blocks of "
        f"{config.block_size}, accuracy_level="
        f"{config.accuracy_level}"
    )


def _opset_for_quantization(model_path: str, out: str, mode: str, steps: list[str]) -> str:
    """Per-axis QuantizeLinear/DequantizeLinear need opset 13: convert older models first."""
    import onnx
    from onnx import version_converter

    model = onnx.load(model_path)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    if mode == "fp16" or opset >= 13:
        return model_path
    converted = version_converter.convert_version(model, 13)
    onnx.save_model(converted, out)
    steps.append(f"opset {opset} -> 13 (onnx.version_converter; per-axis QDQ needs opset 13)")
    return out


def _preprocess(model_path: str, out: str, steps: list[str]) -> str:
    """ORT's quant_pre_process, with the known fallback (skip symbolic shape inference, which
    fails on BERT-like graphs); when both fail, quantize the model as it is and say so."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    try:
        quant_pre_process(model_path, out)
        steps.append("quant_pre_process (symbolic shape inference, ORT optimization, ONNX shapes)")
        return str(out)
    except Exception as err:  # noqa: BLE001 - any error from ORT's tool: try the fallback
        first = error_text(err, 200)
    try:
        quant_pre_process(model_path, out, skip_symbolic_shape=True)
    except Exception as err:  # noqa: BLE001 - quantize without pre-processing, and say so
        steps.append(
            f"quant_pre_process failed ({first}; with skip_symbolic_shape=True: "
            f"{error_text(err, 200)}): quantized without pre-processing, so QDQ pairs may "
            "stay unfused"
        )
        return model_path
    steps.append(
        "quant_pre_process with skip_symbolic_shape=True (symbolic shape inference failed: "
        f"{first})"
    )
    return out


def _static(
    source: str,
    out_path: str,
    config: QuantConfig,
    samples: list[dict[str, np.ndarray]],
    steps: list[str],
) -> None:
    from onnxruntime.quantization import (
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    method = {
        "minmax": CalibrationMethod.MinMax,
        "entropy": CalibrationMethod.Entropy,
        "percentile": CalibrationMethod.Percentile,
    }[config.method]
    fmt = QuantFormat.QDQ if config.format == "qdq" else QuantFormat.QOperator
    extra: dict[str, Any] = {}
    wide = list(config.promote_16bit)
    if wide:
        if fmt != QuantFormat.QDQ:
            raise QuantizationError("promote_16bit needs format='qdq' (16-bit QDQ pairs).")
        extra = {
            "TensorQuantOverrides": {t: [{"quant_type": QuantType.QUInt16}] for t in wide},
            "UseQDQContribOps": True,
        }
    quantize_static(
        source,
        out_path,
        _Reader(samples),
        quant_format=fmt,
        op_types_to_quantize=list(config.op_types) or None,
        per_channel=config.per_channel,
        activation_type=getattr(QuantType, config.activation_type),
        weight_type=getattr(QuantType, config.weight_type),
        calibrate_method=method,
        nodes_to_exclude=list(config.nodes_to_exclude) or None,
        extra_options=extra,
    )
    steps.append(
        f"quantize_static ({config.format.upper()}, {config.method} calibration on "
        f"{len(samples)} samples"
        + (
            f"; {len(config.nodes_to_exclude)} nodes left in float"
            if config.nodes_to_exclude
            else ""
        )
        + (f"; {len(wide)} tensors at 16 bits" if wide else "")
        + ")"
    )


def tensor_errors(
    progress: Progress,
    *,
    base_path: str,
    variant_path: str,
    pairs: dict[str, str],
    samples: list[dict[str, np.ndarray]],
    chunk: int = 16,
) -> dict[str, TensorStats]:
    """Error statistics of each variant tensor against the float tensor it stands for
    (``pairs``: float tensor -> variant tensor), over ``samples``.

    Memory stays bounded: each pass runs both models with a group of extra outputs on one
    sample, folds them into running sums and drops them (a 1.5k-node detector once grew by
    1.5 GB per sample when every activation of every sample was kept). The first group has
    ``chunk`` tensors; each next one is sized from the bytes per tensor seen so far
    (:func:`~ortlab.engine.errorsums.fold_groups`)."""
    check_loads(variant_path, "the variant")  # before any reference run: fail in seconds
    stats, _ = fold_groups(
        progress,
        Side(base_path, None, "the float model"),
        Side(variant_path, None, "the variant"),
        pairs,
        [prepare_feeds(f) for f in samples],
        chunk=chunk,
        most=256,
    )
    return stats


def transformer_optimize(
    progress: Progress,
    *,
    model_path: str,
    out_path: str,
    model_type: str,
    num_heads: int,
    hidden_size: int,
    opt_level: int,
    use_gpu: bool,
) -> TransformerReply:
    """onnxruntime.transformers.optimizer.optimize_model, its log captured."""
    import logging

    from onnxruntime.transformers.optimizer import optimize_model

    records: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(f"{record.levelname}: {record.getMessage()}")

    handler = _Keep(level=logging.INFO)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        with capture_output() as cap:
            optimized = _optimize_or_explain(
                optimize_model,
                model_path,
                model_type=model_type,
                num_heads=num_heads,
                hidden_size=hidden_size,
                opt_level=opt_level,
                use_gpu=use_gpu,
            )
            stats = optimized.get_fused_operator_statistics()
            fully = (
                optimized.is_fully_optimized()
                if hasattr(optimized, "is_fully_optimized")
                else False
            )
            optimized.save_model_to_file(out_path)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    progress(1, 1)
    return TransformerReply(
        stats=dict(stats), fully_optimized=bool(fully), log=records + cap.lines()
    )


def _optimize_or_explain(
    optimize: Callable[..., OnnxModel], path: str, **kwargs: str | int | bool
) -> OnnxModel:

    try:
        return optimize(path, **kwargs)
    except (AssertionError, ValueError, KeyError, IndexError, AttributeError) as err:
        raise OrtlabError(
            f"onnxruntime's transformers optimizer failed on this model with {kwargs}: "
            f"{type(err).__name__}: {err or 'an internal assertion'}. Pass model_type, "
            "num_heads and hidden_size explicitly, or skip the transformers optimizer (ORT's "
            "own graph optimizations still apply)."
        ) from err
