"""Independent references that tests and benchmarks hold ortlab against: written from ORT's own
op names and plain onnxruntime calls, never from ortlab's code."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

# Kernels of ORT's final graph that compute an original op: written from ORT's op names,
# independent of the table ortlab's mapping checks itself with. A MatMul and a Gemm are each
# computed by either op, fused or not, and by int8 QGemm; a MatMul also by the integer MatMul
# kernels and by a fused Attention.
_GEMM_OR_MATMUL = {"Gemm", "FusedGemm", "MatMul", "FusedMatMul", "QGemm"}
_INTEGER_MATMUL = {"MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"}
COMPUTES = {
    "Conv": {"Conv", "FusedConv", "NhwcConv", "QLinearConv", "ConvInteger"},
    "MatMul": _GEMM_OR_MATMUL | _INTEGER_MATMUL | {"Attention"},
    "Gemm": _GEMM_OR_MATMUL,
}


def bare_median_ms(sess: Any, feeds: dict[str, Any], runs: int, warmup: int = 0) -> float:
    """Median latency (ms) of a bare loop of ``runs`` timed ``sess.run`` calls on a plain
    onnxruntime session, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        sess.run(None, feeds)
    lat = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        sess.run(None, feeds)
        lat.append(time.perf_counter_ns() - t0)
    return float(np.median(lat)) / 1e6
