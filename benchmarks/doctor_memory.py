"""Where the doctor's memory goes, on the corpus models: the worker's peak during the doctor
beside the peaks of the builders it calls (ORT's quantizer, ORT's transformers optimizer) and of
one plain session, each in a fresh worker.

The worker's promise is about 2x one session plus what the analysis itself holds. The session
cache is bounded (``ortlab.engine.sessioncache.session_budget``); what it cannot bound is a builder
from ORT that holds several copies of the model while it works. This records both, so the
doctor's peak can be read as "cache + the largest builder" rather than a ratio to one session.

    .venv/bin/python -m benchmarks.doctor_memory [model ...]
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

import ortlab
from benchmarks._common import RssWatch, markdown_table, record, session_peak
from benchmarks.real_models import DOCTOR_BUDGET_S
from tests import corpus

CFG = ortlab.SessionConfig(providers=["cpu"])
DEFAULT = ["minilm_l3", "picodet_layout", "resnet50_legacy", "ppocrv4_rec", "yolov8n_nudenet"]


def _fresh_peak(fn: Any, *args: Any, **kwargs: Any) -> tuple[int, int, str]:
    """(worker idle MB, worker peak MB, outcome) of one call in a fresh worker."""
    import psutil

    from ortlab.engine.worker import get_worker

    get_worker().stop()
    # an empty cache: a variant built by an earlier call would be reused, not built
    os.environ["ORTLAB_CACHE_DIR"] = tempfile.mkdtemp(prefix="ortlab-bench-cache-")
    worker = get_worker()
    worker.call("ping", {})
    idle = psutil.Process(worker.pid).memory_info().rss >> 20
    with RssWatch() as peak, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = fn(*args, **kwargs)
            stopped = [n for n in getattr(out, "notes", []) if "stopped at" in n]
            outcome = "OK" + (f" ({stopped[0][:200]})" if stopped else "")
        except ortlab.OrtlabError as err:
            outcome = f"ortlab error: {str(err).splitlines()[0][:80]}"
    get_worker().stop()
    shutil.rmtree(os.environ.pop("ORTLAB_CACHE_DIR"), ignore_errors=True)
    return idle, peak.peak >> 20, outcome


_ORT_STATIC = """
import sys, tempfile, numpy as np, onnxruntime
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
feeds = dict(np.load(sys.argv[2], allow_pickle=False))
class Reader(CalibrationDataReader):
    def __init__(self):
        self.i = 0
    def get_next(self):
        self.i += 1
        return dict(feeds) if self.i <= int(sys.argv[3]) else None
base = hwm()
quantize_static(sys.argv[1], tempfile.mkdtemp() + "/q.onnx", Reader(), per_channel=True,
                quant_format=QuantFormat.QDQ)
print(base, hwm())
"""


def _ort_static_mb(path: Path, feeds_file: Path, samples: int) -> int | None:
    """Peak MB above the import of ORT's quantize_static alone (no ortlab) in a fresh process,
    calibrating on ``samples`` copies of the feeds; None when ORT's quantizer fails."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", _ORT_STATIC, str(path), str(feeds_file), str(samples)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if out.returncode != 0:
        return None
    base, peak = (int(x) for x in out.stdout.split()[-2:])
    return (peak - base) >> 10


def run_model(name: str) -> dict[str, Any]:
    m = ortlab.load(corpus.path(name))
    feeds = corpus.feeds(name)
    row: dict[str, Any] = {"model": name}
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(Path(tmp) / "feeds.npz", **feeds)
        peak, base = session_peak(m.path, Path(tmp) / "feeds.npz")
        row["session MB"] = round(peak - base)
        for n in (1, 16):
            row[f"ORT static alone, {n} samples MB"] = _ort_static_mb(
                m.path, Path(tmp) / "feeds.npz", n
            )
    verbs: dict[str, tuple[Any, tuple[Any, ...], dict[str, Any]]] = {
        "quantize dynamic": (ortlab.quantize, (m,), {"mode": "dynamic", "feeds": feeds}),
        "quantize static": (
            ortlab.quantize,
            (m,),
            {"mode": "static", "per_channel": True, "calibration_size": 16, "feeds": feeds},
        ),  # as the doctor makes it
        "transformer_optimize": (ortlab.transformer_optimize, (m,), {}),
        "doctor": (
            ortlab.doctor,
            (m, CFG, feeds),
            {"budget_s": DOCTOR_BUDGET_S, "progress": False},
        ),
    }
    for verb, (fn, args, kwargs) in verbs.items():
        idle, peak, outcome = _fresh_peak(fn, *args, **kwargs)
        row["idle MB"] = idle
        row[f"{verb} MB"] = peak - idle if outcome.startswith("OK") else None
        row[f"{verb}"] = outcome
        if outcome != "OK":
            print(f"{name} {verb}: {outcome}", flush=True)
    return row


def main(names: list[str]) -> None:
    rows = [run_model(n) for n in names]
    head = [
        "model",
        "session MB",
        "quantize dynamic MB",
        "quantize static MB",
        "ORT static alone, 1 samples MB",
        "ORT static alone, 16 samples MB",
        "transformer_optimize MB",
        "doctor MB",
    ]
    lines = markdown_table(head, [["—" if r.get(h) is None else r[h] for h in head] for r in rows])
    intro = re.sub(
        r"\s+",
        " ",
        """
The worker's peak above its idle size (MB) while one call runs in a fresh worker, beside one
plain onnxruntime session's (a fresh process: peak after build and one run, less the process
after importing onnxruntime). The doctor builds its variants with ORT's quantizer (static
calibration runs a copy of the model that outputs every intermediate tensor) and transformers
optimizer inside the worker, so its peak is at least the larger of those builders' and never
the session alone. Besides, its session cache may hold up to 2x the largest session but at
least 512 MB (the floor that keeps small models' sessions cached between candidates), and its
footprint stage measures in fresh child processes (counted here, as in real_models). Each call
starts with an empty ortlab cache, so every variant is built, not reused. A builder that failed
(an ortlab error, e.g. a model with nothing to quantize) shows —.""",
    ).strip()
    intro += f" Doctor budget {DOCTOR_BUDGET_S:g} s, CPU.\n\n"
    record("doctor_memory", {"rows": rows}, intro + "\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT)
