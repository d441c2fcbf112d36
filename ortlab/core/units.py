"""Human units for the numbers ortlab prints (used by messages in every layer)."""

from __future__ import annotations

import math

__all__ = ["fmt_bandwidth", "fmt_bytes", "fmt_flops", "fmt_us", "tokens_per_s"]


def tokens_per_s(tokens: float, ms: float) -> float:
    """THE tokens per second of every figure that quotes one (a generation's prefill and
    decode, llama-bench's pp and tg, the doctor's trials): ``tokens`` — every sequence's,
    a batch's included — over ``ms`` milliseconds; NaN for no time."""
    return 1e3 * tokens / ms if ms > 0 else math.nan


def fmt_us(us: float) -> str:
    """Microseconds as every table and line shows them: whole (ORT's profiler counts whole
    µs, and a median of them is at most half a µs finer), thousands separated: ``1003.5`` →
    ``'1,004'``; NaN → ``'?'``."""
    return "?" if math.isnan(us) else f"{us:,.0f}"


def fmt_bytes(n: float) -> str:
    """``1536`` → ``'1.5 KB'`` (binary multiples, one decimal above bytes)."""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(size) < 1024 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"


def fmt_flops(n: float, per: str = "") -> str:
    """``8.2e9`` → ``'8.22 GFLOP'`` (decimal multiples, as FLOP counts are quoted); ``per``
    appends a rate unit: ``fmt_flops(1e12, "/s")`` → ``'1.00 TFLOP/s'``. NaN → ``'?'``."""
    size = float(n)
    if math.isnan(size):  # no formula
        return "?"
    for unit in ("", "K", "M", "G", "T", "P"):
        if abs(size) < 1000 or unit == "P":
            return f"{size:.0f} FLOP{per}" if not unit else f"{size:.3g} {unit}FLOP{per}"
        size /= 1000
    return f"{size:.3g} PFLOP{per}"


def fmt_bandwidth(n: float) -> str:
    """Bytes per second as bandwidths are quoted (decimal): ``3.45e10`` → ``'34.5 GB/s'``."""
    return f"{n / 1e9:.1f} GB/s"
