"""ortlab's cache directory: bundled example models, models given as bytes, profiles in flight.

ortlab never writes next to a user's model. Everything it writes goes here:
``$ORTLAB_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/ortlab``, else ``~/.cache/ortlab``.
Files are written to a temporary name and renamed, so a crash never leaves half a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ortlab.errors import CacheError

__all__ = ["cache_dir", "clear", "size_bytes", "subdir", "temp_dir", "write_atomic"]


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
    path = cache_dir() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


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


def content_path(data: bytes, folder: str = "models", suffix: str = ".onnx") -> Path:
    """A content-addressed file in the cache holding ``data`` (written once)."""
    digest = hashlib.sha256(data).hexdigest()[:24]
    path = subdir(folder) / f"{digest}{suffix}"
    if not path.exists() or path.stat().st_size != len(data):
        write_atomic(path, data)
    return path


@contextlib.contextmanager
def temp_dir(prefix: str) -> Iterator[Path]:
    """A private temporary folder inside the cache, removed on exit whatever happens."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=subdir("tmp")))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


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
