"""One session's memory, measured in a process of its own.

``python -m ortlab.engine._footprint_child --serve``: the worker's measuring process. It imports
everything a measurement needs, once, and then forks a child per request line on stdin; the
child measures and exits, the server answers one line on stdout. A forked child is a process
of its own as a fresh one is (its own resident set and high-water mark, no session built before
it), without paying the interpreter's and onnxruntime's start-up for every measurement: 16 of
them (4 settings, 4 repeats) had cost a small model's footprint 5 s.

``python -m ortlab.engine._footprint_child request.pkl answer.json``: one measurement in a
process started for it, where forking is not safe (a platform without fork, a library that
started threads on import).

The request names the model, its config and the feeds. The child notes its resident set,
resets the kernel's high-water mark, then builds the session and runs it. What the session
cost is the difference: resident after the runs (held) and the high-water mark (peak). A
process of its own, because freed memory rarely goes back to the system: in a process that
built other sessions before, the same session costs less on paper.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ortlab.engine.children import FootprintAnswer, FootprintAsk

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status(key: str) -> int | None:
    """VmRSS / VmHWM in bytes (Linux), None elsewhere."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Reset the high-water mark to the current resident set (Linux >= 4.0)."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def measure(ask: FootprintAsk) -> FootprintAnswer:
    from ortlab.engine.session import build_session
    from ortlab.engine.tasks import prepare_feeds

    with Path(ask["feeds_file"]).open("rb") as f:
        feeds = prepare_feeds(pickle.load(f))  # the worker's own file
    before = _status("VmRSS")
    peak_ok = before is not None and _reset_peak()
    start = time.perf_counter()
    sess, _report = build_session(ask["model_path"], ask["config"], model_name=ask["name"])
    create_s = time.perf_counter() - start
    after_create = _status("VmRSS")
    for _ in range(int(ask["runs"])):
        sess.run(None, feeds)
    held = _status("VmRSS")
    peak = _status("VmHWM") if peak_ok else None
    return {
        "create_ms": create_s * 1e3,
        "created_bytes": None if after_create is None or before is None else after_create - before,
        "held_bytes": None if held is None or before is None else held - before,
        "peak_bytes": None if peak is None or before is None else peak - before,
        "error": "",
    }


def main(request: str, answer: str) -> None:
    with Path(request).open("rb") as f:
        ask = pickle.load(f)  # our own request file, written by the worker
    out: FootprintAnswer | dict[str, str]
    try:
        out = measure(ask)
    except Exception as err:  # noqa: BLE001 - the failure is the answer
        out = {"error": f"{type(err).__name__}: {err}"}
    Path(answer).write_text(json.dumps(out))


def forkable() -> bool:
    """Whether this process can fork safely: one thread (a thread another library started at
    import would hold its locks in the child forever), on a system with fork."""
    if not hasattr(os, "fork"):
        return False
    try:
        return sum(1 for _ in Path("/proc/self/task").iterdir()) == 1
    except OSError:
        return False  # not Linux: no way to count the threads, so no fork


def serve() -> None:
    """Answer measurement requests (a JSON line each: request, answer, log, timeout_s) with a
    forked child each, one at a time: 'exit N' when it ended (N < 0: the signal that killed
    it), 'timeout' when it was killed for taking longer. The first line says whether it forks
    ('fork') or cannot ('no fork': the worker starts a process per measurement instead). A
    worker killed mid-measurement (a cancel, its timeout) takes the child and the server
    with it."""
    import ctypes  # noqa: F401 - the children's _touch, imported once here

    from ortlab.engine.session import build_session  # noqa: F401 - imported before any fork
    from ortlab.engine.tasks import prepare_feeds  # noqa: F401

    said = sys.stdout
    ok = forkable()
    said.write("fork\n" if ok else "no fork\n")
    said.flush()
    if not ok:
        return
    pages = mapped_file_pages()  # after the imports: what a fresh interpreter has resident
    worker = os.getppid()
    for line in sys.stdin:
        ask = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(ask["request"], ask["answer"], ask["log"], pages)
        ended = _wait(pid, float(ask["timeout_s"]), worker)
        if ended == "orphaned":
            return
        said.write(ended + "\n")
        said.flush()


def mapped_file_pages() -> list[int]:
    """The addresses of the pages of files (libraries, their code) this process has mapped in
    now, from ``/proc/self/pagemap``'s present bit; [] where it cannot be read."""
    import struct

    size = os.sysconf("SC_PAGE_SIZE")
    out: list[int] = []
    try:
        maps = Path("/proc/self/maps").read_text().splitlines()
        with Path("/proc/self/pagemap").open("rb") as pagemap:
            for line in maps:
                parts = line.split()
                if len(parts) < 6 or not parts[5].startswith("/") or "r" not in parts[1]:
                    continue
                start, end = (int(x, 16) for x in parts[0].split("-"))
                pagemap.seek(start // size * 8)
                entries = struct.iter_unpack("<Q", pagemap.read((end - start) // size * 8))
                out += [start + k * size for k, (e,) in enumerate(entries) if e >> 63]
    except (OSError, ValueError):
        return []
    return out


def _touch(pages: list[int]) -> None:
    """Read a byte of each page: a forked child does not inherit its parent's mappings of
    file pages (Linux re-faults them on use instead of copying them), so without this the
    library code the session's build runs counted as the session's memory (+0.4 MB on a
    4 MB MatMul against a fresh interpreter); with it, the child starts as resident as the
    server, as a fresh interpreter starts after its imports."""
    import ctypes

    for address in pages:
        ctypes.string_at(address, 1)


def _child(request: str, answer: str, log: str, pages: list[int]) -> None:
    """The forked child: its output to its own log, the server's resident file pages mapped
    in again, one measurement, then out (never back into the server's loop)."""
    code = 1
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        _touch(pages)
        main(request, answer)
        code = 0
    except BaseException:  # noqa: BLE001 - said in the log, the exit status tells the server
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, timeout_s: float, worker: int) -> str:
    """How the child ``pid`` ended: 'exit N', or 'timeout' / 'orphaned' (the worker is gone)
    when it was killed for it."""
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return f"exit {os.waitstatus_to_exitcode(status)}"
        late = time.monotonic() > deadline
        if late or os.getppid() != worker:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout" if late else "orphaned"
        time.sleep(0.002)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main(sys.argv[1], sys.argv[2])
