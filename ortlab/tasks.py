"""Work that runs inside the worker process (or in-process in debug mode).

Every task takes plain, picklable arguments plus a ``progress(done, total)`` callback and returns
plain data. Sessions are cached (a few, LRU) so repeated benchmarks of one config do not pay
session creation again; profiling sessions are never cached (profiling is per session).
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ortlab.capture import capture_output
from ortlab.config import SessionConfig
from ortlab.errors import FeedError, RunError
from ortlab.profiling import parse_profile_file
from ortlab.session import SessionReport, build_session, clean_ort_message

Progress = Callable[[int, int], None]
_SESSIONS: OrderedDict[tuple[str, str, SessionConfig], tuple[Any, SessionReport]] = OrderedDict()
_MAX_SESSIONS = 6
_REPORT_EVERY_NS = 100_000_000  # progress messages at most every 0.1 s, outside timed regions


def _fingerprint(path: str) -> str:
    st = Path(path).stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


def _session(path: str, name: str, config: SessionConfig) -> tuple[Any, SessionReport, bool]:
    key = (path, _fingerprint(path), config)
    if key in _SESSIONS:
        _SESSIONS.move_to_end(key)
        sess, report = _SESSIONS[key]
        return sess, report, True
    sess, report = build_session(path, config, model_name=name)
    _SESSIONS[key] = (sess, report)
    while len(_SESSIONS) > _MAX_SESSIONS:
        _SESSIONS.popitem(last=False)
    return sess, report, False


def clear_sessions(progress: Progress) -> int:  # noqa: ARG001 - task signature
    n = len(_SESSIONS)
    _SESSIONS.clear()
    return n


_BITS_VIEW = {2: np.uint16, 1: np.uint8}


def prepare_feeds(feeds: Mapping[str, Any]) -> dict[str, Any]:
    """numpy arrays ORT cannot take directly (bfloat16, float8…) become typed OrtValues."""
    import onnxruntime as ort
    from onnx import helper

    out: dict[str, Any] = {}
    for name, value in feeds.items():
        arr = np.asarray(value)
        if (
            arr.dtype.kind == "V"
            or type(arr.dtype).__module__.startswith("ml_dtypes")
            or (arr.dtype.name in ("bfloat16",) or arr.dtype.name.startswith(("float8", "float4")))
        ):
            elem = helper.np_dtype_to_tensor_dtype(arr.dtype)
            if arr.dtype.name in ("int4", "uint4", "float4_e2m1fn"):
                raise FeedError(
                    f"Input {name!r} is {arr.dtype.name}: ORT takes 4-bit tensors packed two "
                    "per byte, which ortlab does not build yet. Feed a model with a Cast from "
                    "int8/uint8 instead."
                )
            bits = np.ascontiguousarray(arr).view(_BITS_VIEW[arr.dtype.itemsize])
            out[name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, elem)
        else:
            out[name] = arr
    return out


_NUMPY_LESS = ("bfloat16", "float8", "float4", "int4", "uint4", "int2", "uint2")


def needs_ort_values(sess: Any) -> bool:
    """True when an output's element type has no numpy equivalent in ORT (bfloat16, float8…):
    ``run()`` cannot return it, ``run_with_ort_values`` can."""
    return any(any(t in o.type for t in _NUMPY_LESS) for o in sess.get_outputs())


def to_numpy(value: Any) -> np.ndarray:
    """An output OrtValue (CPU) as numpy, including bfloat16/float8 through ml_dtypes."""
    import ctypes

    from onnx import helper

    if isinstance(value, np.ndarray):
        return value
    want = np.dtype(helper.tensor_dtype_to_np_dtype(int(value.element_type())))
    try:
        arr = np.asarray(value.numpy())
    except Exception:  # noqa: BLE001 - ORT has no numpy type for it: copy the raw bytes
        shape = tuple(value.shape())
        count = int(np.prod(shape)) if shape else 1
        raw = (ctypes.c_uint8 * (count * want.itemsize)).from_address(value.data_ptr())
        return np.frombuffer(bytes(raw), dtype=want).reshape(shape)
    if arr.dtype != want and arr.dtype.itemsize == want.itemsize and want.kind != "O":
        return arr.view(want)  # float8 comes back as its uint8 bits
    return arr


def _runner(sess: Any, feeds: dict[str, Any], io_binding: bool) -> Callable[[], Any]:
    if needs_ort_values(sess) and not io_binding:
        import onnxruntime as ort

        values = {
            k: v if not isinstance(v, np.ndarray) else ort.OrtValue.ortvalue_from_numpy(v)
            for k, v in feeds.items()
        }
        run_values = sess.run_with_ort_values

        def with_ort_values() -> Any:
            return run_values(None, values)

        return with_ort_values
    if not io_binding:
        run = sess.run

        def plain() -> Any:
            return run(None, feeds)

        return plain
    binding = sess.io_binding()
    for name, value in feeds.items():
        if isinstance(value, np.ndarray):
            binding.bind_cpu_input(name, value)
        else:
            binding.bind_ortvalue_input(name, value)
    for out in sess.get_outputs():
        binding.bind_output(out.name)
    run_bound = sess.run_with_iobinding

    def bound() -> Any:
        return run_bound(binding)

    return bound


def _run_error(
    err: Exception, name: str, config: SessionConfig, feeds: Mapping[str, Any]
) -> RunError:
    desc = ", ".join(
        f"{k}: {getattr(v, 'dtype', type(v).__name__)}{list(getattr(v, 'shape', ()))}"
        for k, v in feeds.items()
    )
    return RunError(
        f"Running {name!r} with {config.label()} failed: {clean_ort_message(str(err))} "
        f"(feeds: {desc})"
    )


def benchmark(
    progress: Progress,
    *,
    model_path: str,
    model_name: str,
    config: SessionConfig,
    feeds: Mapping[str, Any],
    runs: int = 100,
    warmup: int = 10,
    duration_s: float | None = None,
) -> dict[str, Any]:
    """Warm up, then time ``runs`` runs (or until ``duration_s``), profiling off."""
    sess, report, cached = _session(model_path, model_name, config)
    prepared = prepare_feeds(feeds)
    run = _runner(sess, prepared, config.io_binding)
    clock = time.perf_counter_ns
    total = warmup + runs
    try:
        for i in range(warmup):
            run()
            progress(i + 1, total)
        lat: list[int] = []
        stop_at = None if duration_s is None else clock() + int(duration_s * 1e9)
        next_report = clock() + _REPORT_EVERY_NS
        for i in range(runs):
            t0 = clock()
            run()
            t1 = clock()
            lat.append(t1 - t0)
            if t1 >= next_report:
                progress(warmup + i + 1, total)
                next_report = t1 + _REPORT_EVERY_NS
            if stop_at is not None and t1 >= stop_at:
                break
    except Exception as err:
        if isinstance(err, FeedError):
            raise
        raise _run_error(err, model_name, config, feeds) from err
    progress(total, total)
    return {"latencies_ns": lat, "report": report, "cached_session": cached, "warmup": warmup}


def profile(
    progress: Progress,
    *,
    model_path: str,
    model_name: str,
    config: SessionConfig,
    feeds: Mapping[str, Any],
    runs: int = 20,
    warmup: int = 3,
) -> dict[str, Any]:
    """Run with ORT's profiler on; the trace is parsed here and its file deleted."""
    from ortlab import cache

    with cache.temp_dir("profile-") as folder:
        sess, report = build_session(
            model_path, config, model_name=model_name, profile_prefix=str(folder / "ortlab")
        )
        prepared = prepare_feeds(feeds)
        run = _runner(sess, prepared, config.io_binding)
        try:
            for i in range(warmup + runs):
                run()
                progress(i + 1, warmup + runs)
        except Exception as err:
            raise _run_error(err, model_name, config, feeds) from err
        finally:
            path = sess.end_profiling()
        data = parse_profile_file(path, skip_runs=warmup)
    return {"data": data, "report": report}


def outputs(
    progress: Progress,
    *,
    model_path: str,
    model_name: str,
    config: SessionConfig,
    feeds: Mapping[str, Any],
) -> dict[str, Any]:
    """One run; the outputs by name."""
    sess, report, _ = _session(model_path, model_name, config)
    try:
        values = [to_numpy(v) for v in _runner(sess, prepare_feeds(feeds), False)()]
    except Exception as err:
        raise _run_error(err, model_name, config, feeds) from err
    progress(1, 1)
    names = [o.name for o in sess.get_outputs()]
    return {"outputs": dict(zip(names, values, strict=True)), "report": report}


def session_report(
    progress: Progress, *, model_path: str, model_name: str, config: SessionConfig
) -> SessionReport:
    _, report, _ = _session(model_path, model_name, config)
    progress(1, 1)
    return report


def auto_providers(progress: Progress) -> tuple[list[str], list[str]]:
    from ortlab.session import auto_providers as choose

    progress(1, 1)
    return choose()


def ping(progress: Progress) -> int:  # noqa: ARG001 - task signature
    return os.getpid()


# Execution providers that compile subgraphs into opaque nodes: a session using one cannot save
# its optimized model, but can dump an EPContext model with the same partition.
COMPILING_EPS = frozenset(
    {
        "OpenVINOExecutionProvider",
        "TensorrtExecutionProvider",
        "NvTensorRTRTXExecutionProvider",
        "QNNExecutionProvider",
        "VitisAIExecutionProvider",
        "CoreMLExecutionProvider",
        "MIGraphXExecutionProvider",
    }
)


def _graph_tuples(path: Path) -> list[tuple[str, str, str, list[str], list[str]]]:
    import onnx

    from ortlab.graphmap import graph_nodes

    graph = onnx.load(str(path), load_external_data=False).graph
    return [
        (n.name, n.op_type, n.domain, list(n.inputs), list(n.outputs)) for n in graph_nodes(graph)
    ]


def placement(
    progress: Progress,
    *,
    model_path: str,
    model_name: str,
    config: SessionConfig,
    feeds: Mapping[str, Any],
    runs: int = 5,
    warmup: int = 2,
) -> dict[str, Any]:
    """One session, three placement sources: assignment info, the profile's providers and the
    verbose placement log; plus the final graph (EPContext dump or optimized model)."""
    import onnxruntime as ort

    from ortlab import cache

    requested = list(config.providers) if config.providers != "auto" else []
    compiled = any(p in COMPILING_EPS for p in requested) or config.providers == "auto"
    with cache.temp_dir("placement-") as folder:
        entries = {"session.record_ep_graph_assignment_info": "1"}
        if compiled:
            entries.update(
                {
                    "ep.context_enable": "1",
                    "ep.context_file_path": str(folder / "context.onnx"),
                    "ep.context_embed_mode": "0",
                }
            )
        sess, report = build_session(
            model_path,
            config,
            model_name=model_name,
            profile_prefix=str(folder / "profile"),
            log_severity=0,
            optimized_model_path=None if compiled else str(folder / "final.onnx"),
            extra_entries=entries,
        )
        ro = ort.RunOptions()
        ro.log_severity_level = 3  # verbose session logging must not slow the profiled runs
        prepared = prepare_feeds(feeds)
        try:
            for i in range(warmup + runs):
                sess.run(None, prepared, ro)
                progress(i + 1, warmup + runs)
        except Exception as err:
            raise _run_error(err, model_name, config, feeds) from err
        finally:
            with capture_output():  # a verbose session logs its end_profiling to fd 2
                trace = sess.end_profiling()
        data = parse_profile_file(trace, skip_runs=warmup)
        assignment = [
            (str(sg.ep_name), [(n.name, n.op_type, n.domain) for n in sg.get_nodes()])
            for sg in sess.get_provider_graph_assignment_info()
        ]
        final_path = next(
            (p for p in (folder / "context.onnx", folder / "final.onnx") if p.exists()), None
        )
        if final_path is None:  # a compiling EP was asked for but did not load
            _, _ = build_session(
                model_path, config.with_(fallback="allow"), model_name=model_name,
                optimized_model_path=str(folder / "final.onnx"),
            )  # fmt: skip
            final_path = folder / "final.onnx"
        final = _graph_tuples(final_path)
    return {
        "report": report,
        "data": data,
        "assignment": assignment,
        "placements": report.placements,
        "final": final,
        "final_source": "EPContext dump"
        if final_path.name == "context.onnx"
        else "optimized model",
    }


def optimize_levels(
    progress: Progress,
    *,
    model_path: str,
    model_name: str,
    config: SessionConfig,
    levels: list[str],
    folder: str,
) -> dict[str, Any]:
    """Save ORT's optimized model per level (weights in a side file) and the transformers that
    fired (from ORT's INFO log)."""
    out: dict[str, Any] = {}
    for i, level in enumerate(levels):
        target = Path(folder) / f"{level}.onnx"
        _, report = build_session(
            model_path,
            config.with_(level=level, fallback="allow"),
            model_name=model_name,
            log_severity=1,
            optimized_model_path=str(target),
            extra_entries={
                "session.optimized_model_external_initializers_file_name": f"{level}.onnx.data",
                "session.optimized_model_external_initializers_min_size_in_bytes": "1024",
            },
        )
        out[level] = {"path": str(target), "report": report, "final": _graph_tuples(target)}
        progress(i + 1, len(levels))
    return out


def interleaved(
    progress: Progress,
    *,
    items: list[tuple[str, str, SessionConfig]],
    feeds: Mapping[str, Any],
    rounds: int = 10,
    runs: int = 10,
    warmup: int = 3,
) -> dict[str, Any]:
    """Time several (model, config) variants in rounds, A B C then C B A …, so drift cancels.

    Returns per round and variant the median of ``runs`` timed runs (ns)."""
    sessions = []
    for path, name, cfg in items:  # build every session before timing anything
        sess, report, _ = _session(path, name, cfg)
        run = _runner(sess, prepare_feeds(feeds), cfg.io_binding)
        for _ in range(warmup):
            run()
        sessions.append((run, report))
    clock = time.perf_counter_ns
    medians = [[0] * len(items) for _ in range(rounds)]
    every: list[list[int]] = [[] for _ in items]
    for r in range(rounds):
        order = range(len(items)) if r % 2 == 0 else reversed(range(len(items)))
        for k in order:
            run = sessions[k][0]
            lat = []
            for _ in range(runs):
                t0 = clock()
                run()
                lat.append(clock() - t0)
            medians[r][k] = int(np.median(lat))
            every[k].extend(lat)
        progress(r + 1, rounds)
    return {"medians_ns": medians, "latencies_ns": every, "reports": [rep for _, rep in sessions]}


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
) -> dict[str, Any]:
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
                optimize_model, model_path, model_type=model_type, num_heads=num_heads,
                hidden_size=hidden_size, opt_level=opt_level, use_gpu=use_gpu,
            )  # fmt: skip
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
    return {"stats": dict(stats), "fully_optimized": bool(fully), "log": records + cap.lines()}


def _optimize_or_explain(optimize: Callable[..., Any], path: str, **kwargs: Any) -> Any:
    from ortlab.errors import OrtlabError

    try:
        return optimize(path, **kwargs)
    except (AssertionError, ValueError, KeyError, IndexError, AttributeError) as err:
        raise OrtlabError(
            f"onnxruntime's transformers optimizer failed on this model with {kwargs}: "
            f"{type(err).__name__}: {err or 'an internal assertion'}. Pass model_type, "
            "num_heads and hidden_size explicitly, or skip the transformers optimizer (ORT's "
            "own graph optimizations still apply)."
        ) from err


class _Reader:
    """A CalibrationDataReader over a list of feeds (ORT's interface: get_next / rewind)."""

    def __init__(self, samples: list[dict[str, Any]]) -> None:
        self.samples = samples
        self.index = 0

    def get_next(self) -> dict[str, Any] | None:
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
    settings: dict[str, Any],
    samples: list[dict[str, Any]],
) -> dict[str, Any]:
    """ORT pre-processing (with the known fallback), then dynamic/static quantization or fp16."""
    import onnx

    from ortlab import cache

    steps: list[str] = []
    mode = settings["mode"]
    with cache.temp_dir("quantize-") as folder, capture_output() as cap:
        source = _opset_for_quantization(model_path, str(folder / "opset.onnx"), mode, steps)
        if settings["preprocess"] and mode != "fp16":
            source = _preprocess(source, str(folder / "pre.onnx"), steps)
        progress(1, 3)
        if mode == "fp16":
            from onnxruntime.transformers.float16 import convert_float_to_float16

            model = convert_float_to_float16(
                onnx.load(source), keep_io_types=settings["keep_io_types"],
                op_block_list=settings["op_block_list"] or None,
            )  # fmt: skip
            onnx.save_model(model, out_path)
            steps.append("fp16: onnxruntime.transformers.float16.convert_float_to_float16"
                         f" (keep_io_types={settings['keep_io_types']})")  # fmt: skip
        elif mode == "dynamic":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(
                source, out_path, op_types_to_quantize=settings["op_types"] or None,
                per_channel=settings["per_channel"],
                weight_type=getattr(QuantType, settings["weight_type"]),
            )  # fmt: skip
            steps.append("quantize_dynamic")
        else:
            _static(source, out_path, settings, samples, steps)
        progress(3, 3)
    return {"steps": steps, "log": cap.lines()[-50:]}


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
    from onnxruntime.quantization.shape_inference import quant_pre_process

    try:
        quant_pre_process(model_path, out)
        steps.append("quant_pre_process (symbolic shape inference, ORT optimization, ONNX shapes)")
    except Exception as err:  # noqa: BLE001 - the known failure on BERT-like graphs
        quant_pre_process(model_path, out, skip_symbolic_shape=True)
        steps.append(
            "quant_pre_process with skip_symbolic_shape=True (symbolic shape inference failed: "
            f"{str(err).splitlines()[0][:200]})"
        )
    return out


def _static(
    source: str, out_path: str, settings: dict[str, Any], samples: list[dict[str, Any]],
    steps: list[str],
) -> None:  # fmt: skip
    from onnxruntime.quantization import (
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    method = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
              "percentile": CalibrationMethod.Percentile}[settings["method"]]  # fmt: skip
    fmt = QuantFormat.QDQ if settings["format"] == "qdq" else QuantFormat.QOperator
    quantize_static(
        source, out_path, _Reader(samples), quant_format=fmt,
        op_types_to_quantize=settings["op_types"] or None, per_channel=settings["per_channel"],
        activation_type=getattr(QuantType, settings["activation_type"]),
        weight_type=getattr(QuantType, settings["weight_type"]), calibrate_method=method,
    )  # fmt: skip
    steps.append(
        f"quantize_static ({settings['format'].upper()}, {settings['method']} calibration on "
        f"{len(samples)} samples)"
    )


def intermediate_outputs(
    progress: Progress,
    *,
    model_path: str,
    tensors: list[str],
    samples: list[dict[str, Any]],
) -> list[dict[str, np.ndarray]]:
    """Run a copy of the model that also outputs ``tensors``; one dict per sample."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    from ortlab import cache

    model = onnx.load(model_path)
    have = {o.name for o in model.graph.output}
    model.graph.output.extend(
        helper.make_empty_tensor_value_info(t) for t in tensors if t not in have
    )
    with cache.temp_dir("intermediates-") as folder:
        path = folder / "model.onnx"
        onnx.save_model(model, str(path))
        so = ort.SessionOptions()
        so.log_severity_level = 3
        # Disable graph optimizations: fused nodes would swallow the tensors we ask for.
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        out = []
        for i, feeds in enumerate(samples):
            values = sess.run(None, prepare_feeds(feeds))
            out.append(
                {n: np.asarray(v) for n, v in zip(names, values, strict=True) if n in tensors}
            )
            progress(i + 1, len(samples))
    return out


def outputs_many(
    progress: Progress,
    *,
    model_path: str,
    model_name: str,
    config: SessionConfig,
    samples: list[dict[str, Any]],
) -> list[dict[str, np.ndarray]]:
    """Outputs for each sample, by output name, under ``config``."""
    sess, _, _ = _session(model_path, model_name, config)
    names = [o.name for o in sess.get_outputs()]
    out = []
    for i, feeds in enumerate(samples):
        try:
            values = [to_numpy(v) for v in _runner(sess, prepare_feeds(feeds), False)()]
        except Exception as err:
            raise _run_error(err, model_name, config, feeds) from err
        out.append(dict(zip(names, values, strict=True)))
        progress(i + 1, len(samples))
    return out
