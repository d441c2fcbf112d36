"""Tasks run inside the worker by tests/test_worker.py: some kill or hang it on purpose."""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable


def abort(progress: Callable[[int, int], None]) -> None:
    progress(1, 2)
    os.abort()


def segfault(progress: Callable[[int, int], None]) -> None:  # noqa: ARG001
    ctypes.string_at(0)


def hang(progress: Callable[[int, int], None]) -> None:  # noqa: ARG001
    time.sleep(3600)


def exit_now(progress: Callable[[int, int], None]) -> None:  # noqa: ARG001
    os._exit(3)


def raise_value_error(progress: Callable[[int, int], None]) -> None:  # noqa: ARG001
    raise ValueError("plain bug inside a task")


def exhaust_memory(progress: Callable[[int, int], None]) -> None:  # noqa: ARG001
    hoard = []
    while True:
        hoard.append(bytearray(256 * 1024 * 1024))


def modules(progress: Callable[[int, int], None]) -> list[str]:  # noqa: ARG001
    """The modules the worker has imported (for the start-up tests)."""
    import sys

    return sorted(sys.modules)


class _SlowTeardown:
    """Stands for an InferenceSession whose teardown takes a while: it waits for ``go`` (up
    to 10 s), then writes ``released``."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def __del__(self) -> None:
        from pathlib import Path

        deadline = time.monotonic() + 10
        while not Path(self.folder, "go").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        Path(self.folder, "released").write_text("1")


def leave_for_after_reply(progress: Callable[[int, int], None], folder: str) -> bool:  # noqa: ARG001
    from ortlab.engine.sessioncache import release_after_reply

    release_after_reply(_SlowTeardown(folder))
    return os.path.exists(os.path.join(folder, "released"))


def exists(progress: Callable[[int, int], None], path: str) -> bool:  # noqa: ARG001
    return os.path.exists(path)


def sleep(progress: Callable[[int, int], None], seconds: float) -> None:  # noqa: ARG001
    time.sleep(seconds)
