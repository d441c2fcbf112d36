"""Facts about this machine that decide or qualify a measurement: the CPU (model, the flags
that make int8/fp16/bf16 fast), core counts, versions. Read once per process from one parse of
``/proc/cpuinfo``; every result that travels carries :func:`environment`."""

from __future__ import annotations

import functools
import os
import platform
from pathlib import Path

from ortlab.core.version import __version__

__all__ = ["cpu_flags", "cpu_model", "environment"]

_SPEED_FLAGS = frozenset({"avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8", "amx_bf16",
                          "avx512_bf16", "avx512_fp16", "f16c"})  # fmt: skip


@functools.cache
def _cpuinfo() -> tuple[str, frozenset[str]]:
    """(model name, flags) of the first CPU in /proc/cpuinfo; ('', ∅) where there is none."""
    model, flags = "", frozenset[str]()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return model, flags
    for line in text.splitlines():
        if line.startswith("model name") and not model:
            model = line.split(":", 1)[1].strip()
        elif line.startswith("flags") and not flags:
            flags = frozenset(line.split(":", 1)[1].split())
        if model and flags:
            break
    return model, flags


def cpu_model() -> str:
    return _cpuinfo()[0] or platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    """The CPU features that decide int8/fp16/bf16 speed ([] where /proc/cpuinfo is absent)."""
    return sorted(_cpuinfo()[1] & _SPEED_FLAGS)


@functools.cache
def _environment() -> tuple[tuple[str, str], ...]:
    import onnxruntime as ort

    return (
        ("ortlab", __version__),
        ("onnxruntime", str(ort.__version__)),
        ("python", platform.python_version()),
        ("platform", platform.platform()),
        ("cpu", cpu_model()),
        ("cpu_count", str(os.cpu_count())),
    )


def environment() -> dict[str, str]:
    """ortlab/ORT/Python versions and the CPU, for results that travel (a fresh dict: callers
    may add to it)."""
    return dict(_environment())
