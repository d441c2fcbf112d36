"""ortlab's cache directory: bundled example models, models given as bytes, profiles in flight.

ortlab never writes next to a user's model. Everything it writes goes here:
``$ORTLAB_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/ortlab``, else ``~/.cache/ortlab``.
Files are written to a temporary name and renamed, so a crash never leaves half a file.

The cache is bounded: ``$ORTLAB_CACHE_MAX_BYTES`` (default 5 GiB). When a folder is handed out
for new files, the least recently used entries (a file, or a folder of one optimized model)
are removed until the cache fits — never ``tmp/`` (work in flight) and never anything used in
the last hour (a model a live session may still read). ``ortlab cache clear`` empties it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ortlab.core.errors import CacheError

__all__ = [
    "cache_dir",
    "clear",
    "is_inside",
    "max_bytes",
    "prune",
    "size_bytes",
    "subdir",
    "sweep_tmp",
    "temp_dir",
    "write_atomic",
]

DEFAULT_MAX_BYTES = 5 * 1024**3
RECENT_S = 3600.0
"""Entries used more recently than this are never evicted."""
PRUNE_EVERY_S = 60.0
"""Walking a large cache costs time: check the bound at most this often per process."""
_last_prune = -PRUNE_EVERY_S


def cache_dir() -> Path:
    """The cache root, created if missing."""
    env = os.environ.get("ORTLAB_CACHE_DIR")
    if env:
        root = Path(env)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = (Path(xdg) if xdg else Path.home() / ".cache") / "ortlab"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CacheError(
            f"ortlab cannot create its cache directory {root}: {err.strerror}. "
            "Set ORTLAB_CACHE_DIR to a writable folder."
        ) from err
    return root


def subdir(name: str) -> Path:
    """A folder of the cache; handing one out for new files first keeps the cache in bounds."""
    global _last_prune  # noqa: PLW0603 - one rate limit per process
    if name != "tmp" and time.monotonic() - _last_prune > PRUNE_EVERY_S:
        _last_prune = time.monotonic()
        prune()
    path = cache_dir() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def max_bytes() -> int:
    value = os.environ.get("ORTLAB_CACHE_MAX_BYTES", "")
    if not value:
        return DEFAULT_MAX_BYTES
    if not value.isdigit():
        raise CacheError(
            f"ORTLAB_CACHE_MAX_BYTES={value!r} is not a number of bytes; e.g. 2000000000 for 2 GB."
        )
    return int(value)


def _entries(root: Path) -> list[tuple[float, int, Path]]:
    """(last use, bytes, path) of every evictable entry: the files and folders one level
    inside each cache folder except tmp/."""
    out = []
    for folder in root.iterdir():
        if not folder.is_dir() or folder.name == "tmp":
            continue
        for entry in folder.iterdir():
            files = [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file()]
            stats = [f.stat() for f in files]
            used = max((max(st.st_mtime, st.st_atime) for st in stats), default=0.0)
            out.append((used, sum(st.st_size for st in stats), entry))
    return out


def prune(limit: int | None = None) -> int:
    """Remove least recently used entries until the cache is within ``limit`` bytes (default
    :func:`max_bytes`); returns the bytes freed. Recent entries and tmp/ are kept."""
    root = cache_dir()
    limit = max_bytes() if limit is None else limit
    entries = sorted(_entries(root))
    total = sum(size for _, size, _ in entries)
    freed = 0
    now = time.time()
    for used, size, path in entries:
        if total - freed <= limit:
            break
        if now - used < RECENT_S:
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        freed += size
    return freed


def write_atomic(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        Path(tmp).replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise
    return path


_DIGEST_CHARS = 24


def is_inside(path: str | Path) -> bool:
    """Whether ``path`` lies in ortlab's cache (a file ortlab made, never the user's)."""
    try:
        return Path(path).resolve().is_relative_to(cache_dir().resolve())
    except (OSError, ValueError):
        return False


def content_path(data: bytes, folder: str = "models", suffix: str = ".onnx") -> Path:
    """A content-addressed file in the cache holding ``data`` (written once)."""
    digest = hashlib.sha256(data).hexdigest()[:_DIGEST_CHARS]
    path = subdir(folder) / f"{digest}{suffix}"
    if not path.exists() or path.stat().st_size != len(data):
        write_atomic(path, data)
    else:
        os.utime(path)  # used again: last to be evicted
    return path


def is_content_path(path: Path) -> bool:
    """Whether ``path`` is a file :func:`content_path` hands out: named by its content's
    digest, so the path alone identifies the content (its mtime changes whenever it is handed
    out again)."""
    stem = path.stem
    return (
        len(stem) == _DIGEST_CHARS
        and all(c in "0123456789abcdef" for c in stem)
        and path.parent.parent == cache_dir()
    )


KEEP_FAILED_LOGS = 5
"""Logs of workers that failed, kept for a post-mortem (the newest; older ones go)."""
STALE_TMP_S = 24 * 3600
"""A temporary folder left this long in the cache's tmp/ belongs to a worker that was killed."""
_FAILED = ("Traceback (most recent call last)", "Fatal Python error", "Segmentation fault")


def sweep_tmp() -> None:
    """Remove what dead workers left in the cache's tmp/: a worker's log
    (``worker-<parent pid>-….log``) once its parent process is gone — at once when it ended
    cleanly, while the newest KEEP_FAILED_LOGS of those that show a failure are kept; and
    temporary folders older than STALE_TMP_S."""
    import psutil

    tmp = subdir("tmp")
    failed: list[Path] = []
    now = time.time()
    for log in tmp.glob("worker-*.log"):
        with contextlib.suppress(OSError):
            parent = log.name.split("-")[1]
            alive = parent.isdigit() and psutil.pid_exists(int(parent))
            if alive or (not parent.isdigit() and now - log.stat().st_mtime < 3600):
                continue
            text = log.read_text(errors="replace")
            if any(mark in text for mark in _FAILED):
                failed.append(log)
            else:
                log.unlink()
    failed.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for log in failed[KEEP_FAILED_LOGS:]:
        log.unlink(missing_ok=True)
    for folder in tmp.iterdir():
        with contextlib.suppress(OSError):
            if folder.is_dir() and now - folder.stat().st_mtime > STALE_TMP_S:
                shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def temp_dir(prefix: str) -> Iterator[Path]:
    """A private temporary folder inside the cache, removed on exit whatever happens."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=subdir("tmp")))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def private_cwd() -> Iterator[Path]:
    """Run inside a private temporary working directory, restored and removed on exit.

    ORT's Python tools write into the current directory: symbolic shape inference (inside
    ``quant_pre_process`` and the transformers optimizer) saves ``sym_shape_infer_temp.onnx``
    and a ``<uuid>.data`` file there when inference is incomplete. Tools run with this as their
    cwd, so nothing lands next to the user's notebook."""
    before = Path.cwd()
    with temp_dir("cwd-") as folder:
        os.chdir(folder)
        try:
            yield folder
        finally:
            os.chdir(before)


def size_bytes() -> int:
    root = cache_dir()
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def clear() -> int:
    """Empty the cache; returns the bytes freed."""
    root = cache_dir()
    freed = size_bytes()
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
    return freed
