"""The worker task that measures this machine's peaks with ORT itself, under the session's own
settings: a large GEMM per precision and, for fp32, a Conv (ORT's NCHWc kernel on a CPU with
AVX2 or wider) for FLOP/s, and an elementwise Add for bytes/s: one streaming from DRAM (three
64 MB tensors at least, twice the last-level cache) and, per cache level the CPU reports (L2,
L3), two whose tensors live inside it. Each run is timed on its own, so the caller sees the
spread, not one number.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ortlab.core import cache
from ortlab.core.config import SessionConfig
from ortlab.core.eps import INSERTED_CAST
from ortlab.core.errors import RunError
from ortlab.core.machine import cache_levels, last_level_cache_bytes, physical_cores
from ortlab.core.run import Progress
from ortlab.engine.replies import PeakRuns, PeaksReply
from ortlab.engine.session import build_session
from ortlab.engine.sessioncache import release_after_reply

__all__ = [
    "GEMM_N",
    "LEVEL_SHARES",
    "STREAM_ELEMENTS",
    "PeakKernel",
    "peak_kernels",
    "peaks",
]

GEMM_N = 1024
"""The GEMM is N x N times N x N: 2 N^3 = 2.1 GFLOP a run."""
CONV_CHANNELS, CONV_SIDE = 256, 28
"""The Conv: 256 to 256 channels, 3x3, over 28 x 28 (0.92 GFLOP a run). ORT's NCHWc Conv beat
its own 1024-square GEMM by 1-3 % here at this shape (and at 128 x 56 and 512 x 14): fp32's
ceiling is the best of both, so a model's Convs do not run above it."""
STREAM_ELEMENTS = 16 * 1024 * 1024
"""fp32 elements per tensor of the Add: 64 MB each, two read and one written."""
LEVEL_SHARES = (0.25, 0.5)
"""The working sets a cache level's Add is timed at, as shares of what the session's threads
hold in that level (:meth:`CacheLevel.capacity`); the level's ceiling is the better. Smaller
sets fit it surely but pay more of ORT's per-call cost (a 0.75 MB Add: 15 us, 50 GB/s here,
against 108 GB/s at 12 MB in a 32 MB L3)."""
SMALL_CALL = 4 * 1024 * 1024
"""A kernel whose run moves fewer bytes is timed 20 times a round instead of 3: its runs take
microseconds, and the best of many is the ceiling."""


def _gemm_model(dtype: str) -> tuple[bytes, dict[str, np.ndarray]]:
    """``y = A @ B`` with B a weight (as in a model: ORT may pre-pack it); int8 is
    MatMulInteger (uint8 activations, int8 weights: what dynamic quantization produces)."""
    from onnx import TensorProto, helper, numpy_helper

    n = GEMM_N
    rng = np.random.default_rng(0)
    if dtype == "int8":
        a = rng.integers(0, 255, (n, n), dtype=np.uint8)
        b = numpy_helper.from_array(rng.integers(-127, 127, (n, n), dtype=np.int8), "b")
        node = helper.make_node("MatMulInteger", ["a", "b"], ["y"])
        elem_in, elem_out = TensorProto.UINT8, TensorProto.INT32
    else:
        np_type = np.float16 if dtype == "fp16" else np.float32
        a = rng.standard_normal((n, n)).astype(np_type)
        b = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np_type), "b")
        node = helper.make_node("MatMul", ["a", "b"], ["y"])
        elem_in = elem_out = TensorProto.FLOAT16 if dtype == "fp16" else TensorProto.FLOAT
    graph = helper.make_graph(
        [node],
        "peak",
        [helper.make_tensor_value_info("a", elem_in, [n, n])],
        [helper.make_tensor_value_info("y", elem_out, [n, n])],
        initializer=[b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString(), {"a": a}


def _conv_model() -> tuple[bytes, dict[str, np.ndarray]]:
    """A 3x3 Conv with its weights as an initializer, as a CNN's are (ORT reorders them once
    for its NCHWc kernel at level all)."""
    from onnx import TensorProto, helper, numpy_helper

    c, side = CONV_CHANNELS, CONV_SIDE
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((c, c, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
        "peak_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, side, side])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, side, side])],
        initializer=[w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString(), {
        "x": rng.standard_normal((1, c, side, side)).astype(np.float32)
    }


def _stream_model(n: int) -> tuple[bytes, dict[str, np.ndarray]]:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "z"], ["y"])],
        "stream",
        [helper.make_tensor_value_info(v, TensorProto.FLOAT, [n]) for v in ("x", "z")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    rng = np.random.default_rng(0)
    feeds = {v: rng.standard_normal(n).astype(np.float32) for v in ("x", "z")}
    return model.SerializeToString(), feeds


@dataclass
class PeakKernel:
    """A peak kernel's session, ready to run (or why it cannot), and its timings so far."""

    what: str
    dtype: str
    work: float
    run: Callable[[], Any] | None
    error: str = ""
    seconds: list[float] = field(default_factory=list)
    repeats: int = 3

    def time_once(self) -> None:
        """Time ``repeats`` runs back to back (the first after other work may start cold)."""
        for _ in range(self.repeats if self.run is not None else 0):
            t0 = time.perf_counter_ns()
            self.run()  # type: ignore[misc]
            self.seconds.append((time.perf_counter_ns() - t0) / 1e9)

    def result(self) -> PeakRuns:
        return PeakRuns(self.what, self.dtype, self.work, list(self.seconds), self.error)


def _level_sets(config: SessionConfig) -> list[tuple[str, int]]:
    """(cache level, fp32 elements per tensor of its Add) for each level and share: three
    tensors (two read, one written) filling ``LEVEL_SHARES`` of what the threads hold there."""
    threads = config.intra_op_threads or physical_cores()
    return [
        (level.name, int(level.capacity(threads) * share) // 12)
        for level in cache_levels()
        for share in LEVEL_SHARES
    ]


def peak_kernels(config: SessionConfig, dtypes: list[str], folder: Path) -> list[PeakKernel]:
    """A session per peak kernel (a GEMM per precision asked, fp32 always; the stream Add from
    DRAM and an Add inside each cache level), built with ``config``'s EPs and threads, warmed
    up twice (allocation, pre-packing)."""
    out: list[PeakKernel] = []
    wanted = [d for d in ("fp32", "int8", "fp16") if d in dtypes or d == "fp32"]
    for dtype in [*wanted, "conv"]:
        if dtype == "conv":
            model, feeds = _conv_model()
            what, work = "fp32 Conv", 2.0 * CONV_CHANNELS**2 * 9 * CONV_SIDE**2
        else:
            model, feeds = _gemm_model(dtype)
            what, work = f"{dtype} GEMM", 2.0 * GEMM_N**3
        out.append(_kernel(config, folder, name=dtype, what=what, work=work, built=(model, feeds)))
    dram = max(STREAM_ELEMENTS, last_level_cache_bytes() // 6)  # twice the cache, at least
    streams = [("memory", dram), *_level_sets(config)]
    for i, (dtype, n) in enumerate(streams):
        if n < 1024:
            continue
        what = "fp32 stream (Add)" if dtype == "memory" else f"fp32 {dtype}-resident (Add)"
        k = _kernel(
            config, folder, name=f"{dtype}-{i}", what=what, work=12.0 * n, built=_stream_model(n)
        )
        k.dtype = dtype
        k.repeats = 20 if k.work < SMALL_CALL else 3
        out.append(k)
    return out


def _kernel(
    config: SessionConfig,
    folder: Path,
    *,
    name: str,
    what: str,
    work: float,
    built: tuple[bytes, dict[str, np.ndarray]],
) -> PeakKernel:
    """One kernel's session, warmed up; the Conv stands for fp32 (named NCHWc when ORT's
    layout transformer took it)."""
    model, feeds = built
    dtype = "fp32" if name == "conv" else name
    path = folder / f"peak-{name}.onnx"
    path.write_bytes(model)
    try:
        final = folder / f"final-{name}.onnx"
        # no spinning: an idle pool that spins steals the cores from the next kernel's
        sess, _ = build_session(
            str(path),
            config.with_(fallback="allow", level="all", allow_spinning=False),
            model_name="peak",
            optimized_model_path=str(final),
        )
        optimized = final.read_bytes()
        if INSERTED_CAST.encode() in optimized:
            raise RunError(
                "this EP has no kernel at this precision: ORT runs it in float, between casts"
            )
        if name == "conv" and b"com.microsoft.nchwc" in optimized:
            what = "fp32 NCHWc Conv"
        run = functools.partial(sess.run, None, feeds)
        run()
        run()
    except Exception as err:  # noqa: BLE001 - the EP has no such kernel: say so, go on
        return PeakKernel(what, dtype, work, None, f"{type(err).__name__}: {err}"[:300])
    return PeakKernel(what, dtype, work, run)


def peaks(
    progress: Progress, *, config: SessionConfig, dtypes: list[str], runs: int = 10
) -> PeaksReply:
    """Time a GEMM per precision in ``dtypes`` (fp32, int8, fp16) and the stream Add, each
    ``runs`` times in rounds, in sessions built with ``config``'s settings."""
    with cache.temp_dir("peak-") as folder:
        kernels = peak_kernels(config, dtypes, folder)
        for i in range(runs):
            for k in kernels:
                k.time_once()
            progress(i + 1, runs)
        release_after_reply(*kernels)
        return PeaksReply([k.result() for k in kernels])
