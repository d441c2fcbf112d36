"""Human units for the numbers ortlab prints (used by messages in every layer)."""

from __future__ import annotations

import math

__all__ = [
    "fmt_bandwidth",
    "fmt_bytes",
    "fmt_flops",
    "fmt_interval",
    "fmt_ms",
    "fmt_num",
    "fmt_pm",
    "fmt_rate",
    "fmt_us",
    "tokens_per_s",
]


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


SIGNIFICANT = 3
"""Digits a figure below 100 keeps (34.4 tokens/s, 1.69 ms, 0.573); from 100 up it is whole
and thousands-separated (262,977 tokens/s): no decimals finer than a measurement's noise."""


def _decimals(x: float) -> int:
    """The decimals :func:`fmt_num` gives ``x`` (its bounds in an interval get the same)."""
    a = abs(x)
    if math.isnan(a) or math.isinf(a) or a >= 10 ** (SIGNIFICANT - 1) or a == 0:
        return 0
    return max(0, SIGNIFICANT - 1 - math.floor(math.log10(a)))


def fmt_num(x: float, decimals: int | None = None) -> str:
    """THE number format: thousands separators, :data:`SIGNIFICANT` significant digits below
    100 and whole from 100 up (``262977.4`` → ``'262,977'``, ``34.41`` → ``'34.4'``,
    ``0.0332`` → ``'0.0332'``); ``decimals`` forces the decimals (an interval's bounds take
    its value's); NaN → ``'—'``."""
    if math.isnan(x):
        return "—"
    return f"{x:,.{_decimals(x) if decimals is None else decimals}f}"


def fmt_pm(mean: float, sd: float) -> str:
    """A mean and its standard deviation, the deviation in the mean's decimals:
    ``fmt_pm(178861.48, 1203.2)`` → ``'178,861 ± 1,203'`` (llama-bench's t/s cell)."""
    d = _decimals(mean)
    return f"{fmt_num(mean, d)} ± {fmt_num(sd, d)}"


def fmt_rate(x: float, unit: str) -> str:
    """A rate in its unit: ``fmt_rate(34399.1, 'tokens/s')`` → ``'34,399 tokens/s'``."""
    return f"{fmt_num(x)} {unit}"


def _time_unit(ms: float) -> tuple[float, str]:
    """The scale and unit a duration of ``ms`` milliseconds reads in: µs below 1 ms, s from
    1,000 ms, else ms."""
    a = abs(ms)
    if a < 1:
        return 1e3, "µs"
    if a >= 1e3:
        return 1e-3, "s"
    return 1.0, "ms"


def fmt_ms(ms: float) -> str:
    """A duration given in milliseconds, in the unit its magnitude reads in: ``0.0332`` →
    ``'33.2 µs'``, ``32.27`` → ``'32.3 ms'``, ``1234`` → ``'1.23 s'``; NaN → ``'—'``."""
    if math.isnan(ms):
        return "—"
    scale, unit = _time_unit(ms)
    return f"{fmt_num(ms * scale)} {unit}"


def fmt_interval(mid: float, low: float, high: float, unit: str = "ms") -> str:
    """THE interval: ``'value unit [low, high]'``, the bounds in the value's unit and
    decimals. ``unit='ms'`` scales a duration by its magnitude (``0.0332, 0.0323, 0.0361`` →
    ``'33.2 µs [32.3, 36.1]'``); any other unit is a rate or a count as given. No interval
    (NaN bounds): the value alone."""
    if math.isnan(mid):
        return "—"
    scale, shown = _time_unit(mid) if unit == "ms" else (1.0, unit)
    d = _decimals(mid * scale)
    value = f"{fmt_num(mid * scale, d)} {shown}".rstrip()
    if math.isnan(low) or math.isnan(high):
        return value
    return f"{value} [{fmt_num(low * scale, d)}, {fmt_num(high * scale, d)}]"
