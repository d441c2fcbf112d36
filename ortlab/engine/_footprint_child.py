"""One session's memory, measured in a process of its own (``python -m``, by the worker).

``python -m ortlab.engine._footprint_child request.pkl answer.json``: the request names the
model, its config and the feeds. The child imports everything first, notes its resident set,
resets the kernel's high-water mark, then builds the session and runs it. What the session
cost is the difference: resident after the runs (held) and the high-water mark (peak). A
process of its own, because freed memory rarely goes back to the system: in a process that
built other sessions before, the same session costs less on paper.
"""

from __future__ import annotations

import json
import pickle
import sys
import time
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


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
