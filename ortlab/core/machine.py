"""Facts about this machine that decide or qualify a measurement: the CPU (model, the flags
that make int8/fp16/bf16 fast), core counts, versions. Read once per process from one parse of
``/proc/cpuinfo``; every result that travels carries :func:`environment`."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import platform
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ortlab.core import telemetry
from ortlab.core.runtime import ort_version
from ortlab.core.version import __version__

__all__ = [
    "BUSY_CORES",
    "IDLE_WINDOW_S",
    "CacheLevel",
    "CpuSample",
    "cache_levels",
    "cpu_flags",
    "cpu_model",
    "cpu_sample",
    "environment",
    "load_sentence",
    "logical_cpus",
    "measured_load",
    "other_cores",
    "physical_cores",
    "thread_counts",
]

IDLE_WINDOW_S = 0.2
"""How long after its last run a session's idle CPU is measured: ORT's thread pool spins
waiting for the next run (allow_spinning), burning cores an idle service pays for."""

_SPEED_FLAGS = frozenset(
    {
        "avx2",
        "avx512f",
        "avx512_vnni",
        "avx_vnni",
        "amx_int8",
        "amx_bf16",
        "avx512_bf16",
        "avx512_fp16",
        "f16c",
    }
)


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


@dataclass(frozen=True)
class CacheLevel:
    """One level of the CPU's data caches as Linux reports it (/sys): its name ('L2', 'L3'),
    the size of one instance and how many instances the machine's CPUs share out."""

    name: str
    size: int
    instances: int

    def capacity(self, threads: int) -> int:
        """What ``threads`` threads on as many cores can hold in this level: a private cache
        per core each reaches (an L2 per core: threads x its size), a shared one once."""
        return self.size * max(1, min(threads, self.instances))


def _size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    digits = text.rstrip("KMG")
    return int(digits) * scale if digits.isdigit() else 0


@functools.cache
def cache_levels() -> tuple[CacheLevel, ...]:
    """The data caches from L2 outwards, nearest first (L1 is left out: no ORT kernel call is
    small enough to be timed inside it); () where /sys does not say."""
    root = Path("/sys/devices/system/cpu")
    found: dict[int, tuple[int, set[str]]] = {}
    for index in sorted(root.glob("cpu[0-9]*/cache/index[0-9]*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = _size((index / "size").read_text())
            shared = (index / "shared_cpu_list").read_text().strip()
        except (OSError, ValueError):
            continue
        if level < 2 or kind not in ("Data", "Unified") or size <= 0:
            continue
        old = found.setdefault(level, (size, set()))
        old[1].add(shared)
    return tuple(
        CacheLevel(f"L{level}", size, len(shared))
        for level, (size, shared) in sorted(found.items())
    )


def last_level_cache_bytes() -> int:
    """The largest CPU cache's capacity (every instance of it), or 0 when unknown."""
    levels = cache_levels()
    return levels[-1].capacity(levels[-1].instances) if levels else 0


def cpu_flags() -> list[str]:
    """The CPU features that decide int8/fp16/bf16 speed ([] where /proc/cpuinfo is absent)."""
    return sorted(_cpuinfo()[1] & _SPEED_FLAGS)


@functools.cache
def _environment() -> tuple[tuple[str, str], ...]:
    return (
        ("ortlab", __version__),
        ("onnxruntime", ort_version()),
        ("python", platform.python_version()),
        ("platform", platform.platform()),
        ("cpu", cpu_model()),
        ("cpu_count", str(logical_cpus())),
        ("trace reader", f"msgspec {_msgspec_version()} (as strict as JSON)"),
    )


def _msgspec_version() -> str:
    from importlib.metadata import version

    return version("msgspec")


def environment() -> dict[str, str]:
    """ortlab/ORT/Python versions, the CPU and what the runtime's telemetry does (what ortlab
    set for its processes, what it found in this one), for results that travel (a fresh
    dict: callers may add to it)."""
    return {**dict(_environment()), "runtime telemetry": telemetry.state().line()}


# ---------------------------------------------------------------------- machine load

BUSY_CORES = 0.25
"""Other processes using more CPU than this (in cores) while something was timed make the
machine busy: timings then carry its noise (and thread or spinning advice is specific to it)."""


@dataclass(frozen=True)
class CpuSample:
    """CPU counters at one instant: all processes' busy time (summed over logical CPUs) and the
    time of this process tree (the caller and its ortlab worker)."""

    wall_s: float
    busy_s: float
    own_s: float
    cpus: int


class ProcessTimes(Protocol):
    """What ortlab reads of ``psutil.Process.cpu_times()`` (``children_*`` where present)."""

    @property
    def user(self) -> float: ...
    @property
    def system(self) -> float: ...


class ProcessLike(Protocol):
    """What ortlab reads of a ``psutil.Process``."""

    def cpu_times(self) -> ProcessTimes: ...
    def children(self, recursive: bool = False) -> list[ProcessLike]: ...


class PsutilLike(Protocol):
    """What :func:`cpu_sample` reads of the psutil module (tests pass a fake with this API)."""

    def cpu_times(self) -> object: ...
    def cpu_count(self) -> int | None: ...
    def Process(self, pid: int = ...) -> ProcessLike: ...  # noqa: N802 - psutil's name


def logical_cpus() -> int:
    """THE logical CPU count (hardware threads) wherever ortlab names one: the thread sweep's
    largest count, the environment line, the throughput's oversubscription."""
    return os.cpu_count() or 1


def thread_counts(physical: int, logical: int | None = None) -> list[int]:
    """THE intra-op thread counts the doctor tries, for a plain run and for a generation: one,
    half the physical cores, all of them, and every logical CPU."""
    top = logical_cpus() if logical is None else logical
    return sorted({1, max(physical // 2, 1), physical, top})


@functools.cache
def physical_cores() -> int:
    """The physical cores: what ORT's default intra-op pool sizes itself to (one thread per
    physical core), and so what the doctor's thread sweep, the throughput's oversubscription
    note and every thread advice count; logical CPUs where psutil cannot tell."""
    import psutil

    return int(psutil.cpu_count(logical=False) or logical_cpus())


def cpu_sample(ps: PsutilLike | None = None) -> CpuSample:
    """Read the counters; ``ps`` is the psutil module (tests pass a fake with the same API)."""
    import psutil

    ps = psutil if ps is None else ps
    t = ps.cpu_times()
    busy = sum(getattr(t, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq"))
    own = _tree_cpu_s(ps.Process()) + _caller_cpu_s(ps)
    return CpuSample(time.perf_counter(), float(busy), own, int(ps.cpu_count() or 1))


def _caller_cpu_s(ps: PsutilLike) -> float:
    """In ortlab's worker, the CPU seconds of the process that called it (a notebook's kernel,
    a script: ``ORTLAB_WORKER_PARENT``), its own threads only: waiting for and relaying the
    work it asked for is not other processes' load. 0 outside a worker."""
    pid = int(os.environ.get("ORTLAB_WORKER_PARENT", "0") or 0)
    if not pid or pid == os.getpid():
        return 0.0
    try:
        t = ps.Process(pid).cpu_times()
    except Exception:  # noqa: BLE001 - gone, or not ours to read: nothing to subtract
        return 0.0
    return float(t.user + t.system)


def _tree_cpu_s(proc: ProcessLike) -> float:
    """CPU seconds of ``proc`` and its descendants: live ones by their own times, ended ones
    through their parent's ``children_*`` times (once waited for)."""
    import psutil

    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:  # ended between listing and reading
            continue
        total += t.user + t.system + getattr(t, "children_user", 0.0)
        total += getattr(t, "children_system", 0.0)
    return total


MIN_LOAD_WINDOW_S = 0.25
"""CPU counters tick every 10 ms and are read process by process: over a shorter window their
skew is most of the figure (a doctor stage that lasted 3 ms read as 2.0 of 2 cores busy), so
the doctor gives such a stage no load figure."""


def load_sentence(other: float | None, cpus: int | str | None = None) -> str:
    """THE sentence for the machine's load while something was measured, which every view
    of a timing quotes: 'other processes used 0.92 of 2 cores while this was measured: …'."""
    if other is None or math.isnan(other):
        return "machine load: not measured"
    of = f" of {cpus}" if cpus else ""
    text = f"machine load: other processes used {other:.2f}{of} cores"
    if other > BUSY_CORES:
        text += (
            " while this was measured: times are noisier and slower than on an idle "
            "machine (re-run when it is idle to confirm)"
        )
    return text


@dataclass
class Load:
    """Other processes' cores over a :func:`measured_load` block (None until it ends, or when
    no time passed)."""

    cores: float | None = None


@contextlib.contextmanager
def measured_load() -> Iterator[Load]:
    """THE load around a call from the caller's side (this process and its worker are its own
    tree, so only other processes count): ``with measured_load() as load: …``, then
    ``load.cores``, rounded to 0.01 core as every result stores it."""
    load, before = Load(), cpu_sample()
    try:
        yield load
    finally:
        cores = other_cores(before, cpu_sample())
        load.cores = None if math.isnan(cores) else round(cores, 2)


def other_cores(before: CpuSample, after: CpuSample) -> float:
    """Cores other processes used on average between two samples (NaN if no time passed)."""
    wall = after.wall_s - before.wall_s
    if wall <= 0:
        return math.nan
    others = (after.busy_s - before.busy_s) - (after.own_s - before.own_s)
    return min(max(others / wall, 0.0), float(after.cpus))
