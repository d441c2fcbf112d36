"""This machine's ceilings as measured in this Python session: the one home of a peak.

A peak (FLOP/s of a GEMM per precision, bytes/s of an Add from DRAM and inside each cache level)
is measured with ORT itself under a session's EPs and thread settings (``engine.tasks_peaks``).
A ceiling is the most the machine did: a slower measurement later means a busier machine, not a
slower one. So every measurement of the same settings is folded here, each ceiling keeps its
best, and every view asks here: the roofline, the Limits tab and the doctor of one Lab read the
very same :class:`Peak` objects, and a fast figure seen once is never replaced by the halved one
a busy moment gave (139 against 65 GFLOP/s ten minutes apart, before this home).
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np

from ortlab.core.config import SessionConfig
from ortlab.core.machine import cache_levels
from ortlab.engine import tasks_peaks
from ortlab.engine.calls import Via
from ortlab.engine.calls import run as run_task
from ortlab.engine.replies import PeakRuns

__all__ = [
    "PRECISIONS",
    "Peak",
    "all_peaks",
    "bandwidths",
    "forget",
    "is_bandwidth",
    "known",
    "measure",
    "raise_to",
    "record",
    "settings_key",
]

PRECISIONS = ("fp32", "int8", "fp16")
"""The GEMM ceilings, one per precision."""


def bandwidths() -> tuple[str, ...]:
    """The bytes/s ceilings: 'memory' (DRAM) and one per cache level this CPU reports."""
    return ("memory", *(level.name for level in cache_levels()))


def all_peaks() -> tuple[str, ...]:
    """Every ceiling a roofline may need: a GEMM per precision, DRAM's and each cache level's
    bandwidth."""
    return (*PRECISIONS, *bandwidths())


def is_bandwidth(dtype: str) -> bool:
    """A bytes/s ceiling ('memory', 'L2', 'L3'…), not a FLOP/s one."""
    return dtype == "memory" or (dtype[:1] == "L" and dtype[1:].isdigit())


@dataclass(frozen=True)
class Peak:
    """One measured ceiling: FLOP/s at a precision (``dtype`` fp32, int8, fp16) or bytes/s
    (``dtype`` 'memory' from DRAM, 'L2', 'L3' inside that cache level); ``best`` is the
    ceiling used, ``median`` shows the spread of the measurement it came from, ``measured``
    how many measurements of this session it is the best of."""

    what: str
    dtype: str
    best: float
    median: float
    runs: int
    error: str = ""
    measured: int = 1
    reached_by: str = ""
    """The node whose kernel reached this ceiling where one beat the measured one (a ceiling
    is the most this machine was seen to do); '' for a measured ceiling."""


_LOCK = threading.Lock()
SettingsKey: TypeAlias = tuple[tuple[str, ...] | str, str, str | None, int, str]
"""What a peak depends on (:func:`settings_key`)."""
_SEEN: dict[SettingsKey, dict[str, Peak]] = {}


def settings_key(config: SessionConfig) -> SettingsKey:
    """What a peak depends on: the EPs, their options and the thread settings (not the
    optimization level or anything about the model)."""
    return (
        config.providers,
        repr(config.provider_options),
        config.policy,
        config.intra_op_threads,
        config.execution_mode,
    )


def _peak(p: PeakRuns) -> Peak:
    rates = [p.work / s for s in p.seconds if s > 0]
    best = max(rates) if rates else math.nan
    median = float(np.median(rates)) if rates else math.nan
    return Peak(p.what, p.dtype, best, median, len(rates), p.error)


def record(config: SessionConfig, runs: Iterable[PeakRuns]) -> None:
    """Fold a measurement into the session's ceilings for ``config``'s settings: each keeps
    the higher best (a measured one over one that failed). Kernels of one measurement that
    stand for the same ceiling (fp32's GEMM and Conv) count as one measurement of it."""
    mine: dict[str, Peak] = {}
    for p in map(_peak, runs):
        other = mine.get(p.dtype)
        mine[p.dtype] = p if other is None else _better(other, p)
    with _LOCK:
        seen = _SEEN.setdefault(settings_key(config), {})
        for dtype, p in mine.items():
            old = seen.get(dtype)
            seen[dtype] = (
                p
                if old is None
                else dataclasses.replace(_better(old, p), measured=old.measured + 1)
            )


def _better(old: Peak, new: Peak) -> Peak:
    return new if old.error or (not new.error and new.best > old.best) else old


def known(config: SessionConfig, dtypes: Iterable[str] | None = None) -> list[Peak] | None:
    """The session's ceilings for ``config``'s settings, in ``dtypes`` order (every one of
    :func:`all_peaks` by default), or None when one of them was never measured."""
    dtypes = all_peaks() if dtypes is None else dtypes
    with _LOCK:
        seen = _SEEN.get(settings_key(config), {})
        found = [seen.get(d) for d in dtypes]
    return None if any(p is None for p in found) else [p for p in found if p is not None]


def measure(
    config: SessionConfig, dtypes: Iterable[str], *, runs: int = 10, timeout: float | None
) -> None:
    """Measure the GEMM peaks of ``dtypes`` and both bandwidths now, in the worker under
    ``config``'s settings, and fold them in (:func:`record`)."""
    via = Via("peaks", f"of this machine with {config.label()}", timeout=timeout)
    reply = run_task(tasks_peaks.peaks, via, config=config, dtypes=list(dtypes), runs=runs)
    record(config, reply.runs)


def raise_to(config: SessionConfig, dtype: str, rate: float, node: str) -> Peak | None:
    """Raise ``dtype``'s ceiling for ``config``'s settings to ``rate``, what ``node``'s kernel
    reached, where that beats it: the ceiling is then no longer the plain kernel's measurement
    but the most this machine was seen to do (the new Peak says which node). Returns the
    ceiling it replaced, or None when nothing changed."""
    with _LOCK:
        seen = _SEEN.get(settings_key(config), {})
        old = seen.get(dtype)
        if old is None or old.error or not rate > old.best:
            return None
        seen[dtype] = dataclasses.replace(old, best=rate, reached_by=node)
        return old


def forget() -> None:
    """Drop every ceiling measured so far (the next roofline measures afresh)."""
    with _LOCK:
        _SEEN.clear()
