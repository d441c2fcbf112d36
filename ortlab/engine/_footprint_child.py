"""One session's memory, measured in a process of its own.

``python -m ortlab.engine._footprint_child --serve``: the worker's measuring process, the one
way a footprint is measured. It imports everything a measurement needs, once, and then forks a
child per request line on stdin; the child measures and exits, the server answers one line on
stdout. A forked child is a process of its own as a fresh one is (its own resident set and
high-water mark, no session built before it), without paying the interpreter's and
onnxruntime's start-up for every measurement: 16 of them (4 settings, 4 repeats) had cost a
small model's footprint 5 s. Where the server cannot fork safely (no fork on this system, or a
second thread after its imports) it says why and measures nothing.

One fixed offset, stated rather than hidden: a forked child does not inherit its parent's
mappings of file pages (Linux faults them in again on use), so the library code that builds
and runs the session counts in the child's resident set where a fresh interpreter had most of
it resident before it started (0.33-0.40 MB here: ``analysis.memory.FORK_OFFSET_MB``). Each
measurement reports its file pages (``file_bytes``: the growth of ``RssFile``), and the
footprint says them beside its figures; the anonymous memory (the session's own) is what a
fresh interpreter reads.

``python -m ortlab.engine._footprint_child request.pkl answer.json``: one measurement in a
fresh interpreter: the reference the tests and ``benchmarks/footprint_processes.py`` compare
the forked children with (ortlab itself never measures this way).

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
    """VmRSS / VmHWM / RssFile in bytes (Linux), None elsewhere."""
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
    before, files_before = _status("VmRSS"), _status("RssFile")
    peak_ok = before is not None and _reset_peak()
    start = time.perf_counter()
    sess, _report = build_session(ask["model_path"], ask["config"], model_name=ask["name"])
    create_s = time.perf_counter() - start
    after_create = _status("VmRSS")
    for _ in range(int(ask["runs"])):
        sess.run(None, feeds)
    held, files = _status("VmRSS"), _status("RssFile")
    peak = _status("VmHWM") if peak_ok else None
    return {
        "create_ms": create_s * 1e3,
        "created_bytes": None if after_create is None or before is None else after_create - before,
        "held_bytes": None if held is None or before is None else held - before,
        "peak_bytes": None if peak is None or before is None else peak - before,
        "file_bytes": None if files is None or files_before is None else files - files_before,
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


def why_not_fork() -> str:
    """'' when this process can fork safely: one thread (a thread another library started at
    import would hold its locks in the child forever), on a system with fork; else why not."""
    if not hasattr(os, "fork"):
        return "this system has no fork()"
    try:
        threads = sum(1 for _ in Path("/proc/self/task").iterdir())
    except OSError:
        return "this system has no /proc/self/task to count the threads (Linux only)"
    if threads > 1:
        return (
            f"the measuring process has {threads} threads after its imports (a library started "
            "them; a forked child would wait on their locks)"
        )
    return ""


def serve() -> None:
    """Answer measurement requests (a JSON line each: request, answer, log, timeout_s) with a
    forked child each, one at a time: 'exit N' when it ended (N < 0: the signal that killed
    it), 'timeout' when it was killed for taking longer. The first line says whether it forks
    ('fork') or why it cannot ('no fork: …', and it ends). A worker killed mid-measurement (a
    cancel, its timeout) takes the child and the server with it."""
    from ortlab.engine.session import build_session  # noqa: F401 - imported before any fork
    from ortlab.engine.tasks import prepare_feeds  # noqa: F401

    said = sys.stdout
    why = why_not_fork()
    said.write(f"no fork: {why}\n" if why else "fork\n")
    said.flush()
    if why:
        return
    worker = os.getppid()
    for line in sys.stdin:
        ask = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(ask["request"], ask["answer"], ask["log"])
        ended = _wait(pid, float(ask["timeout_s"]), worker)
        if ended == "orphaned":
            return
        said.write(ended + "\n")
        said.flush()


def _child(request: str, answer: str, log: str) -> None:
    """The forked child: its output to its own log, one measurement, then out (never back
    into the server's loop)."""
    code = 1
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
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
