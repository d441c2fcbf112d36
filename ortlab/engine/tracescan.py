"""The compiled reader of ORT's trace lines (``tracescan.c``), built once per machine.

ORT 1.31 writes a profile with one event per line and every line's header in one layout; the
header holds all a node event's per-run facts (name, category, thread, start, duration) and the
``args`` after it hold 90 % of the bytes. A JSON decoder must tokenize every byte of those args
to step over them (~0.07 s of a 100k-event trace's ~0.15 s with msgspec); ``tracescan.c`` reads
the headers and jumps to each line's end with ``memchr``, ~0.02 s for the same trace. Any line
out of that layout (another ORT version's, a string with escapes, a float time) makes
:func:`scan` return None, and the parser decodes the whole trace with msgspec: both readers give
the same columns (``tests/test_tracescan.py`` checks it on real traces and generated ones).

The C file is compiled with the machine's C compiler (``$CC``, else ``cc``, ``gcc`` or
``clang``) into ortlab's cache, named by the hash of its source, the first time a trace is
parsed (~0.1 s, once per machine); without a compiler, or with ``ORTLAB_NATIVE=0``, every trace
takes the msgspec path. :func:`status` says which path this process takes and why.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import mmap
import os
import platform
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ortlab.core import cache

__all__ = ["Lines", "scan", "status"]

SOURCE = Path(__file__).with_name("tracescan.c")
COMPILE_TIMEOUT_S = 120.0
_MIN_LINE = 80
"""Bytes of the shortest line in ORT's layout: an upper bound on the events a trace holds."""


class Lines(NamedTuple):
    """Per event of a trace, as :func:`scan` read it."""

    strings: list[str]
    """The distinct names and categories, in order of first appearance."""
    name: np.ndarray
    """int64: index into ``strings``."""
    cat: np.ndarray
    """int64: index into ``strings``."""
    tid: np.ndarray
    """int64: the OS thread, as ORT wrote it."""
    ts: np.ndarray
    """float64, µs since profiling began."""
    dur: np.ndarray
    """float64, µs."""
    args_at: np.ndarray
    """int64: where the event's ``args`` object starts in the trace's bytes."""
    args_end: np.ndarray
    """int64: where it ends (exclusive)."""


def scan(raw: bytes | memoryview | mmap.mmap) -> Lines | None:
    """The trace's events read from its lines, or None when the compiled reader is not
    available or a line is not in ORT's one-event-per-line layout (decode it as JSON then)."""
    lib = _library()
    if lib is None:
        return None
    buf = np.frombuffer(raw, dtype=np.uint8)
    for min_line in (_LINE_GUESS, _MIN_LINE):  # a second try only for a trace of short lines
        try:
            lines = _read(lib, buf, buf.size // min_line + 16)
        except MemoryError:  # the arrays for the events: msgspec needs less to say why
            return None
        if lines != _MORE_EVENTS:
            return lines if isinstance(lines, Lines) else None
    return None


_LINE_GUESS = 256
"""Bytes per event the first try sizes its arrays for (ORT's node events are ~900; a trace of
shorter lines is read again with arrays for :data:`_MIN_LINE`)."""
_MORE_EVENTS = -3
"""``ortlab_scan``'s result when the trace holds more events than the arrays."""


def _read(lib: ctypes.CDLL, buf: np.ndarray, cap: int) -> Lines | int:
    """The events, or ``ortlab_scan``'s negative result."""
    name, cat = (np.empty(cap, dtype=np.int32) for _ in range(2))
    tid, dur, ts, args_at, args_end = (np.empty(cap, dtype=np.int64) for _ in range(5))
    str_at, str_len = np.empty(2 * cap, dtype=np.int64), np.empty(2 * cap, dtype=np.int32)
    n_strings = np.zeros(1, dtype=np.int64)
    out = (name, cat, tid, dur, ts, args_at, args_end, str_at, str_len, n_strings)
    count = int(lib.ortlab_scan(buf.ctypes.data, buf.size, cap, *(a.ctypes.data for a in out)))
    if count < 0:
        return count
    k = int(n_strings[0])
    try:
        strings = [
            bytes(buf[a : a + n]).decode("utf-8")
            for a, n in zip(str_at[:k].tolist(), str_len[:k].tolist(), strict=True)
        ]
    except UnicodeDecodeError:  # the JSON decoder says where and why
        return -1
    return Lines(
        strings,
        name[:count].astype(np.int64),
        cat[:count].astype(np.int64),
        tid[:count].copy(),
        ts[:count].astype(np.float64),
        dur[:count].astype(np.float64),
        args_at[:count].copy(),
        args_end[:count].copy(),
    )


def status() -> str:
    """Which reader this process's traces take, and why."""
    lib, why = _loaded()
    return f"compiled reader ({why})" if lib is not None else f"msgspec only: {why}"


def _library() -> ctypes.CDLL | None:
    return _loaded()[0]


@functools.cache
def _loaded() -> tuple[ctypes.CDLL | None, str]:
    """The compiled reader, loaded once per process, and its path or why there is none."""
    try:
        path = _build()
    except (OSError, subprocess.SubprocessError) as err:
        return None, f"the C compiler failed ({err}); profiles still parse, ~4x slower"
    if isinstance(path, str):
        return None, path
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as err:
        return None, f"{path.name} does not load ({err})"
    ptr, i64 = ctypes.c_void_p, ctypes.c_int64
    lib.ortlab_scan.restype = i64
    lib.ortlab_scan.argtypes = [ptr, i64, i64, *[ptr] * 10]
    return lib, str(path)


def _build() -> Path | str:
    """The compiled reader's path in the cache, compiled first if this source is new here; or
    why there is none. Finding it writes nothing (the cache is pruned only to compile)."""
    if os.environ.get("ORTLAB_NATIVE", "1") == "0":
        return "ORTLAB_NATIVE=0"
    compiler = _compiler()
    if compiler is None:
        return "no C compiler ($CC, cc, gcc or clang) on PATH; profiles parse ~4x slower"
    source = SOURCE.read_bytes()
    key = hashlib.sha256(
        b"\0".join([source, " ".join(compiler).encode(), platform.machine().encode()])
    ).hexdigest()[:16]
    name = f"tracescan-{key}{_SUFFIX}"
    found = cache.cache_dir() / "native" / name
    if found.exists():
        return found
    target = cache.subdir("native") / name
    with cache.temp_dir("native-") as folder:
        built = folder / name
        done = subprocess.run(
            [*compiler, "-O2", "-shared", "-fPIC", "-o", str(built), str(SOURCE)],
            capture_output=True,
            text=True,
            timeout=COMPILE_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0 or not built.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return f"{compiler[0]} could not compile {SOURCE.name}: {tail[0]}"
        built.replace(target)  # atomic: a process beside this one loads all of it or none
    return target


_SUFFIX = {"win32": ".dll", "darwin": ".dylib"}.get(sys.platform, ".so")


def _compiler() -> list[str] | None:
    env = shlex.split(os.environ.get("CC", ""))
    if env and shutil.which(env[0]):
        return env
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return [found]
    return None
