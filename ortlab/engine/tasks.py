"""Work that runs inside the worker process (or in-process in debug mode).

Every task takes plain, picklable arguments plus a ``progress(done, total)`` callback and returns
plain data. Sessions are cached (a few, LRU) so repeated benchmarks of one config do not pay
session creation again; profiling sessions are never cached (profiling is per session).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ortlab.core import cache
from ortlab.core.config import SessionConfig
from ortlab.core.eps import COMPILING_EPS
from ortlab.core.errors import (
    FeedError,
    RunError,
)
from ortlab.core.graph import graph_nodes
from ortlab.core.inputs import FeedsLike
from ortlab.core.machine import CpuSample, cpu_sample, other_cores
from ortlab.core.run import ModelJob, Progress
from ortlab.engine.capture import capture_output
from ortlab.engine.probe import probe_nodes
from ortlab.engine.replies import (
    OutputsReply,
    PlacementReply,
    ProfileReply,
    SavedLevel,
)
from ortlab.engine.session import SessionReport, build_session, clean_ort_message
from ortlab.engine.session import auto_providers as choose
from ortlab.engine.sessioncache import (
    cached_count,
    check_fits,
    model_files,
    open_session,
    release_after_reply,
)
from ortlab.engine.trace import ProfileData, parse_profile_file
from ortlab.engine.verdicts import verdict_names

if TYPE_CHECKING:
    import onnxruntime as ort

REPORT_EVERY_NS = 100_000_000  # progress messages at most every 0.1 s, outside timed regions


def cached_sessions(progress: Progress) -> int:  # noqa: ARG001 - task signature
    """How many sessions the worker holds (tests check the memory bound with it)."""
    return cached_count()


_BITS_VIEW = {2: np.uint16, 1: np.uint8}


def prepare_feeds(feeds: FeedsLike) -> dict[str, np.ndarray | ort.OrtValue]:
    """numpy arrays ORT cannot take directly (bfloat16, float8…) become typed OrtValues."""
    import onnxruntime as ort
    from onnx import helper

    out: dict[str, np.ndarray | ort.OrtValue] = {}
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


def needs_ort_values(sess: ort.InferenceSession) -> bool:
    """True when an output's element type has no numpy equivalent in ORT (bfloat16, float8…):
    ``run()`` cannot return it, ``run_with_ort_values`` can."""
    return any(any(t in o.type for t in _NUMPY_LESS) for o in sess.get_outputs())


def to_numpy(value: ort.OrtValue | np.ndarray | list[object] | dict[object, object]) -> Any:
    """An output OrtValue (CPU) as numpy, including bfloat16/float8 through ml_dtypes; a
    non-tensor output (a sequence or map) stays the Python value ORT returns."""
    import ctypes

    from onnx import helper

    if isinstance(value, np.ndarray | list | dict):
        return value  # non-tensor outputs (ZipMap's sequence of maps) as ORT gives them
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


def make_runner(
    sess: ort.InferenceSession, feeds: Mapping[str, np.ndarray | ort.OrtValue], io_binding: bool
) -> Callable[[], Any]:
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


def run_error(err: Exception, name: str, config: SessionConfig, feeds: FeedsLike) -> RunError:
    desc = ", ".join(
        f"{k}: {getattr(v, 'dtype', type(v).__name__)}{list(getattr(v, 'shape', ()))}"
        for k, v in feeds.items()
    )
    return RunError(
        f"Running {name!r} with {config.label()} failed: {clean_ort_message(str(err))} "
        f"(feeds: {desc})."
    )


def profile(
    progress: Progress,
    job: ModelJob,
    *,
    runs: int = 20,
    warmup: int = 3,
) -> ProfileReply:
    """Run with ORT's profiler on; the trace is parsed here and its file deleted."""
    model_path, model_name, config, feeds = job.model_path, job.model_name, job.config, job.feeds

    with cache.temp_dir("profile-") as folder:
        since = cpu_sample()
        sess, report = build_session(
            model_path, config, model_name=model_name, profile_prefix=str(folder / "ortlab")
        )
        data = profiled_runs(sess, config, feeds, model_name, runs, warmup, progress, since)
    return ProfileReply(data=data, report=report)


def profiled_runs(  # noqa: PLR0917 - the profiling loop's own inputs, all needed
    sess: ort.InferenceSession,
    config: SessionConfig,
    feeds: FeedsLike,
    model_name: str,
    runs: int,
    warmup: int,
    progress: Progress,
    since: CpuSample,
) -> ProfileData:
    """``warmup + runs`` runs of a session built with profiling on; its trace, parsed (warm-up
    runs dropped), while its folder still exists, with the load since ``since``."""
    run = make_runner(sess, prepare_feeds(feeds), config.io_binding)
    try:
        for i in range(warmup + runs):
            run()
            progress(i + 1, warmup + runs)
    except Exception as err:
        raise run_error(err, model_name, config, feeds) from err
    finally:
        path = sess.end_profiling()
    return with_load(parse_profile_file(path, skip_runs=warmup), since)


def with_load(data: ProfileData, since: CpuSample) -> ProfileData:
    """``data`` with the machine's load from ``since`` (sampled before the session was built)
    to now: the cores other processes used while the session was built and profiled."""
    load = other_cores(since, cpu_sample())
    return data if math.isnan(load) else dataclasses.replace(data, other_cores=round(load, 2))


def outputs(
    progress: Progress,
    job: ModelJob,
) -> OutputsReply:
    """One run; the outputs by name."""
    model_path, model_name, config, feeds = job.model_path, job.model_name, job.config, job.feeds
    sess, report, _ = open_session(model_path, model_name, config)
    try:
        values = [to_numpy(v) for v in make_runner(sess, prepare_feeds(feeds), False)()]
    except Exception as err:
        raise run_error(err, model_name, config, feeds) from err
    progress(1, 1)
    names = [o.name for o in sess.get_outputs()]
    return OutputsReply(outputs=dict(zip(names, values, strict=True)), report=report)


def auto_providers(progress: Progress) -> tuple[list[str], list[str]]:

    progress(1, 1)
    return choose()


def ping(progress: Progress) -> int:  # noqa: ARG001 - task signature
    return os.getpid()


def ort_version(progress: Progress) -> str:  # noqa: ARG001 - task signature
    """The onnxruntime this worker imported (another environment's worker has its own)."""
    import onnxruntime as ort

    return str(ort.__version__)


def side_weights(data_file: str) -> dict[str, str]:
    """Session entries that write a saved optimized model's weights to ``data_file`` next to
    it, so the model itself stays small and quick to read back."""
    return {
        "session.optimized_model_external_initializers_file_name": data_file,
        "session.optimized_model_external_initializers_min_size_in_bytes": "1024",
    }


def _graph_tuples(path: Path) -> list[tuple[str, str, str, tuple[str, ...], tuple[str, ...], str]]:
    """The final graph's nodes as tuples of strings (sent back pickled; a tuple of strings is
    one object the caller's garbage collector soon stops tracking, a list is tracked)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return [
        (n.name, n.op_type, n.domain, tuple(n.inputs), tuple(n.outputs), n.parent)
        for n in graph_nodes(graph, subgraphs=True)
    ]


def placement(
    progress: Progress,
    job: ModelJob,
    *,
    runs: int = 5,
    warmup: int = 2,
) -> PlacementReply:
    """One session, three placement sources: assignment info, the profile's providers and the
    verbose placement log; plus the final graph (EPContext dump or optimized model)."""
    model_path, model_name, config, feeds = job.model_path, job.model_name, job.config, job.feeds
    import onnxruntime as ort

    requested = list(config.providers) if config.providers != "auto" else []
    compiled = any(p in COMPILING_EPS for p in requested) or config.providers == "auto"
    with cache.temp_dir("placement-") as folder:
        entries = {"session.record_ep_graph_assignment_info": "1"}
        if not compiled:
            entries.update(side_weights("final.onnx.data"))
        if compiled:
            entries.update(
                {
                    "ep.context_enable": "1",
                    "ep.context_file_path": str(folder / "context.onnx"),
                    "ep.context_embed_mode": "0",
                }
            )
        since = cpu_sample()
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
        clock, ort_ns = time.perf_counter_ns, report.create_ms * 1e6  # inside ORT's calls
        try:
            for i in range(warmup + runs):
                t0 = clock()
                sess.run(None, prepared, ro)
                ort_ns += clock() - t0
                progress(i + 1, warmup + runs)
        except Exception as err:
            raise run_error(err, model_name, config, feeds) from err
        finally:
            t0 = clock()
            with capture_output():  # a verbose session logs its end_profiling to fd 2
                trace = sess.end_profiling()
            ort_ns += clock() - t0
        data = with_load(parse_profile_file(trace, skip_runs=warmup), since)
        assignment = [
            (str(sg.ep_name), [(n.name, n.op_type, n.domain) for n in sg.get_nodes()])
            for sg in sess.get_provider_graph_assignment_info()
        ]
        final_path = next(
            (p for p in (folder / "context.onnx", folder / "final.onnx") if p.exists()), None
        )
        if final_path is None:  # a compiling EP was asked for but did not load
            _, _ = build_session(
                model_path,
                config.with_(fallback="allow"),
                model_name=model_name,
                optimized_model_path=str(folder / "final.onnx"),
            )
            final_path = folder / "final.onnx"
        final = _graph_tuples(final_path)
    release_after_reply(sess)
    return PlacementReply(
        probes=_probe_fallbacks(model_path, config, report, assignment),
        report=report,
        data=data,
        assignment=assignment,
        placements=report.placements,
        final=final,
        final_source="EPContext dump" if final_path.name == "context.onnx" else "optimized model",
        ort_ms=ort_ns / 1e6,
    )


def _probe_fallbacks(
    model_path: str,
    config: SessionConfig,
    report: SessionReport,
    assignment: list[tuple[str, list[tuple[str, str, str]]]],
) -> dict[str, str]:
    """Nodes the wanted EP left to another EP without a logged verdict: would it take each
    alone? (see :mod:`ortlab.engine.probe`)."""
    wanted = report.wanted
    if not wanted or wanted not in report.active:
        return {}
    said = verdict_names(report.why_log)  # nodes ORT or the EP already gave a verdict on
    left = [
        n for ep, nodes in assignment if ep != wanted for n, _, _ in nodes if n and n not in said
    ]
    return probe_nodes(model_path, config, left, wanted) if left else {}


def optimize_levels(
    progress: Progress,
    *,
    model_path: str,
    model_name: str,
    config: SessionConfig,
    levels: list[str],
    folder: str,
) -> dict[str, SavedLevel]:
    """Save ORT's optimized model per level (weights in a side file) and the transformers that
    fired (from ORT's INFO log), by level."""
    out: dict[str, SavedLevel] = {}
    for i, level in enumerate(levels):
        target = Path(folder) / f"{level}.onnx"
        _, report = build_session(
            model_path,
            config.with_(level=level),
            model_name=model_name,
            log_severity=1,
            optimized_model_path=str(target),
            extra_entries=side_weights(f"{level}.onnx.data"),
        )
        out[level] = SavedLevel(path=str(target), report=report, final=_graph_tuples(target))
        progress(i + 1, len(levels))
    return out


def outputs_many(
    progress: Progress,
    *,
    model_path: str,
    model_name: str,
    config: SessionConfig,
    samples: list[dict[str, np.ndarray]],
    seeded: bool = False,
) -> list[dict[str, np.ndarray]]:
    """Outputs for each sample, by output name, under ``config``. ``seeded`` (a model with
    unseeded random ops): on a copy whose random ops are seeded by name, so two models
    compared this way draw the same numbers (a cached session's draws have moved on)."""
    if not seeded:
        sess, _, _ = open_session(model_path, model_name, config)
        return _outputs_of(sess, model_name, config, samples, progress)
    check_fits(model_path, model_name)
    with cache.temp_dir("seeded-") as folder:
        sess, _ = build_session(_seeded_copy(model_path, folder), config, model_name=model_name)
        return _outputs_of(sess, model_name, config, samples, progress)


def _seeded_copy(model_path: str, folder: Path) -> str:
    """The model with its random ops seeded by name, saved in ``folder`` (its external data
    beside it, copied)."""
    import onnx

    from ortlab.core.onnx_util import seed_random_ops

    model = onnx.load(model_path)
    seed_random_ops(model.graph)
    path = folder / "model.onnx"
    external = sum(1 for _ in model_files(model_path)) > 1
    onnx.save_model(
        model,
        str(path),
        save_as_external_data=external,
        all_tensors_to_one_file=True,
        location="model.onnx.data",
    )
    return str(path)


def _outputs_of(
    sess: ort.InferenceSession,
    model_name: str,
    config: SessionConfig,
    samples: list[dict[str, np.ndarray]],
    progress: Progress,
) -> list[dict[str, np.ndarray]]:
    names = [o.name for o in sess.get_outputs()]
    out = []
    for i, feeds in enumerate(samples):
        try:
            values = [to_numpy(v) for v in make_runner(sess, prepare_feeds(feeds), False)()]
        except Exception as err:
            raise run_error(err, model_name, config, feeds) from err
        out.append(dict(zip(names, values, strict=True)))
        progress(i + 1, len(samples))
    return out
