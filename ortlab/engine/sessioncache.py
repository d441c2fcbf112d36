"""The worker's session cache: a few sessions kept (least recently used first out) so repeated
calls of one configuration do not pay session creation again, bounded by what they hold in
memory (:func:`session_budget`): each session's resident growth when it was built and over
its first runs (its arena). Sessions whose teardown is slow are released after the reply.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ortlab.core.config import SessionConfig
from ortlab.core.errors import SessionCreationError
from ortlab.engine.session import SessionReport, build_session

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = [
    "SESSION_BYTES",
    "SMALL_SESSIONS_BYTES",
    "cached_count",
    "check_fits",
    "clear",
    "count_first_runs",
    "file_fingerprint",
    "keep_only",
    "model_files",
    "open_session",
    "release_after_reply",
    "release_deferred",
    "rss_bytes",
    "session_budget",
]

_SESSIONS: OrderedDict[tuple[str, str, SessionConfig], tuple[Any, SessionReport]] = OrderedDict()
_MAX_SESSIONS = 6

_RELEASE_AFTER_REPLY: list[Any] = []
"""What a task is done with but whose teardown is slow: an InferenceSession frees its kernels
and arenas when dropped (~30 ms for a 1,500-node model). The worker drops these after it has
sent the reply (:func:`release_deferred`), so the caller does not wait for them; it reads the
next call only afterwards, so a teardown never overlaps a timed run."""


def release_after_reply(*objects: object) -> None:
    _RELEASE_AFTER_REPLY.extend(objects)


def release_deferred() -> None:
    """Drop what the last task left for after its reply (the worker calls this)."""
    _RELEASE_AFTER_REPLY.clear()


def file_fingerprint(path: str) -> str:
    st = Path(path).stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


SESSION_BYTES: dict[Any, int] = {}
"""Per cached session, the worker's resident growth when it was built (its weights, prepacked
kernels and plan) and over its first runs (its arena: a 1024x1024 conv net's activations grow
a session built in 8 MB to 279 MB): what the cache's memory bound counts."""
_RAN: set[Any] = set()
"""Sessions whose first runs' growth is counted in SESSION_BYTES."""
SMALL_SESSIONS_BYTES = 512 << 20
"""Sessions this small together are kept up to ``_MAX_SESSIONS``, whatever their count."""


def session_budget() -> int:
    """The most the cached sessions may hold together: two of the largest (the worker's promise:
    about 2x one session plus what the analysis holds), at least 512 MB so small models keep
    their cache. ``ORTLAB_SESSION_BUDGET_MB`` sets it (tests, small machines)."""
    env = os.environ.get("ORTLAB_SESSION_BUDGET_MB")
    if env:
        return int(float(env) * 2**20)
    return max(2 * max(SESSION_BYTES.values(), default=0), SMALL_SESSIONS_BYTES)


def rss_bytes() -> int:
    """This process's resident size. A difference of two measures what was allocated between
    them, less what reused memory a dropped session freed (the C library keeps small freed
    blocks; big buffers, an arena's, go back to the system and are counted again)."""
    import psutil

    return int(psutil.Process().memory_info().rss)


def open_session(
    path: str, name: str, config: SessionConfig
) -> tuple[ort.InferenceSession, SessionReport, bool]:
    key = (path, file_fingerprint(path), config)
    if key in _SESSIONS:
        _SESSIONS.move_to_end(key)
        sess, report = _SESSIONS[key]
        return sess, report, True
    weights = check_fits(path, name)
    before = rss_bytes()
    sess, report = build_session(path, config, model_name=name)
    _SESSIONS[key] = (sess, report)
    # at least its weights: the growth reads less, even 0, where the C library gives the
    # session memory a dropped one freed (a long test run: two MLP sessions passed for fitting
    # a 1 KB budget together)
    SESSION_BYTES[key] = max(rss_bytes() - before, weights)
    _RAN.discard(key)  # a new session: its first runs are still to count
    while len(_SESSIONS) > _MAX_SESSIONS:
        _evict(deferred=True)
    while len(_SESSIONS) > 1 and sum(SESSION_BYTES.values()) > session_budget():
        _evict(deferred=False)  # memory first: dropped now, not after the reply
    return sess, report, False


def count_first_runs(path: str, config: SessionConfig, grown: int) -> None:
    """Count what a session's first runs grew the worker by (its arena, sized by the inputs)
    as the session's own, once, and keep the cache within its bound: the least recently used
    sessions other than this one are released after the reply. A task calls it after the
    warm-up runs of a session it opened."""
    key = (path, file_fingerprint(path), config)
    if key not in SESSION_BYTES or key in _RAN:
        return
    _RAN.add(key)
    SESSION_BYTES[key] += max(grown, 0)
    while len(_SESSIONS) > 1 and sum(SESSION_BYTES.values()) > session_budget():
        oldest = next(iter(_SESSIONS))
        if oldest == key:
            break
        _evict(deferred=False)  # memory first (a runner of this task may still hold it)


def keep_only(path: str, config: SessionConfig) -> None:
    """Release every cached session but this one, now: a task about to hold sessions of its
    own beside it (a comparison in pairs) keeps the worker at two sessions, not the cache's
    two plus its own."""
    key = (path, file_fingerprint(path), config)
    for other in [k for k in _SESSIONS if k != key]:
        SESSION_BYTES.pop(other, None)
        _RAN.discard(other)
        del _SESSIONS[other]


def check_fits(path: str, name: str) -> int:
    """Refuse, with the numbers, a session that cannot fit in the memory free now: its
    weights (external data included) are held at least twice while ORT builds it (the file's
    and the kernels' prepacked copies). Cached sessions are dropped first to make room.
    Returns the weights' bytes (the model's files)."""
    import psutil

    weights = sum(f.stat().st_size for f in model_files(path))
    while True:
        free = psutil.virtual_memory().available
        if 2 * weights <= 0.9 * free or not _SESSIONS:
            break
        _evict(deferred=False)
    if 2 * weights > 0.9 * free:
        raise SessionCreationError(
            f"{name!r} cannot be opened here: its weights ({weights / 2**30:.2f} GiB) need at "
            f"least {2 * weights / 2**30:.2f} GiB while onnxruntime builds the session, and "
            f"{free / 2**30:.2f} GiB of memory is free. Close other programs or sessions, or "
            "use a machine with more memory."
        )
    return weights


def model_files(path: str) -> list[Path]:
    """The model file and the external-data files beside it that it names."""
    import onnx

    files = [Path(path)]
    if files[0].stat().st_size > 64 << 20:  # weights inside: reading the graph costs as much
        return files
    try:
        head = onnx.load(path, load_external_data=False)
    except Exception:  # noqa: BLE001 - ORT says what is wrong with it, in its own words
        return files
    from ortlab.core.externaldata import data_files

    return files + data_files(head, Path(path).parent)


def _evict(*, deferred: bool) -> None:
    """Drop the least recently used cached session."""
    key, entry = _SESSIONS.popitem(last=False)
    SESSION_BYTES.pop(key, None)
    _RAN.discard(key)
    if deferred:
        release_after_reply(entry)
    else:
        del entry


def cached_count() -> int:
    """How many sessions the cache holds."""
    return len(_SESSIONS)


def clear() -> None:
    """Release every cached session now (tests; a fresh start)."""
    _SESSIONS.clear()
    SESSION_BYTES.clear()
    _RAN.clear()
