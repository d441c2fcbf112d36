"""Shared helpers for the benchmark scripts: machine info, recording results, markdown tables,
paired verdicts and memory sampling."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ortlab.core.stats import Verdict

RESULTS = Path(__file__).parent / "results"


def machine() -> dict[str, str]:
    from ortlab.analysis.benchmark import environment

    info = environment()
    info["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return info


def record(name: str, data: dict[str, Any], markdown: str) -> Path:
    """Write results/<name>.json and results/<name>.md and print the markdown."""
    RESULTS.mkdir(exist_ok=True)
    payload = {"benchmark": name, "machine": machine(), **data}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    env = payload["machine"]
    header = (
        f"_{env['date']} · {env['cpu']} ({env['cpu_count']} CPUs) · onnxruntime "
        f"{env['onnxruntime']} · ortlab {env['ortlab']}_\n\n"
    )
    (RESULTS / f"{name}.md").write_text(f"# {name}\n\n{header}{markdown}\n")
    print(header + markdown)
    return path


def markdown_table(head: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """The lines of a markdown table: the header, its rule, then one line per row of cells."""
    return [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(str(c) for c in cells) + " |" for cells in rows),
    ]


def verdict_fields(verdict: Verdict, ratio_key: str, a: str, b: str) -> dict[str, Any]:
    """A paired comparison as results record it: ``ratio_key`` (b over a), the 95 % interval
    and the verdict in words."""
    return {
        ratio_key: verdict.ratio,
        "ci95": [verdict.low, verdict.high],
        "verdict": verdict.text(a, b),
    }


class RssWatch:
    """Resident memory of a process with its child processes, sampled every 20 ms on a thread
    while the ``with`` block runs, as (time, bytes). ``pid`` None: the ortlab worker's, looked
    up at each sample (a verb may restart it)."""

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        import psutil

        from ortlab.engine.worker import get_worker

        while not self._stop.is_set():
            pid = self.pid if self.pid is not None else getattr(get_worker(), "pid", None)
            with contextlib.suppress(psutil.Error, TypeError):
                proc = psutil.Process(pid)
                rss = proc.memory_info().rss + sum(
                    c.memory_info().rss for c in proc.children(recursive=True)
                )
                self.samples.append((time.time(), rss))
            self._stop.wait(0.02)

    @property
    def peak(self) -> int:
        """The highest sample, bytes (0 before any)."""
        return max((rss for _, rss in self.samples), default=0)

    def peak_mb(self, start: float = 0.0, end: float = float("inf")) -> int:
        """The highest sample taken between ``start`` and ``end`` (``time.time()``), MiB."""
        return max((rss for t, rss in self.samples if start <= t <= end), default=0) >> 20

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


_SESSION_PEAK = """
import sys, numpy as np, onnxruntime as ort
def hwm():  # the process's own peak (ru_maxrss would carry the parent's over fork + exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
base = hwm()
feeds = dict(np.load(sys.argv[2], allow_pickle=False))
sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
sess.run(None, feeds)
print(base, hwm())
"""


def session_peak(path: Path, feeds_file: Path) -> tuple[float, float]:
    """(peak MB of a fresh process that imports onnxruntime, builds one session and runs it
    once; MB after the import alone)."""
    out = subprocess.run(
        [sys.executable, "-c", _SESSION_PEAK, str(path), str(feeds_file)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    base, peak = (int(x) for x in out.stdout.split())
    return peak / 1024, base / 1024
