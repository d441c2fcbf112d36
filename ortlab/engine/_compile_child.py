"""A compile-only session of one plugin EP, in a process of its own (run as a script).

``python _compile_child.py request.json answer.json``: the request names the model, the plugin
module and EP, the provider options and where to write the EPContext dump. QNN's HTP backend
keeps the first session's settings (``htp_arch``, ``soc_model``) for the life of a process,
so each prediction gets a fresh one. Run by path, not ``-m``: it imports only the standard
library, onnxruntime and the plugin (no ``ortlab``, whose API import would double the start-up
time); :mod:`ortlab.engine.tasks_whatif` reads the files it leaves behind.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from ortlab.engine.children import CompileAnswer, CompileAsk

T = TypeVar("T")

KEEP = (
    "Validation FAILED",
    "Validation PASSED",
    "Operator type:",
    "REASON",
    "EP Error",
    "Falling back to [",
)


def _capture(fn: Callable[[], T]) -> tuple[T | None, str, str]:
    """Run ``fn`` with fds 1/2 pointed at a file (ORT logs from C++ to fd 2 and prints its
    "EP Error" block to stdout): (result, captured text, error text)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with tempfile.TemporaryFile() as sink:
        for fd in saved:
            os.dup2(sink.fileno(), fd)
        result: T | None = None
        error = ""
        try:
            result = fn()
        except Exception as err:  # noqa: BLE001 - the compile's failure is the answer
            error = str(err)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
        sink.seek(0)
        text = sink.read().decode("utf-8", errors="replace")
    return result, text, error


def compile_only(ask: CompileAsk) -> CompileAnswer:
    import onnxruntime as ort

    pkg = importlib.import_module(ask["module"])
    ep = ask["ep"]
    ort.register_execution_provider_library(ep, str(pkg.get_library_path()))
    devices = [d for d in ort.get_ep_devices() if d.ep_name == ep]
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(
        ort.GraphOptimizationLevel, ask.get("level", "ORT_ENABLE_BASIC")
    )
    so.log_severity_level = 0
    so.add_provider_for_devices(devices[: ask.get("max_devices", len(devices))], ask["options"])
    for key, value in {
        **ask.get("entries", {}),
        "session.record_ep_graph_assignment_info": "1",
        "ep.context_enable": "1",
        "ep.context_file_path": ask["context_path"],  # fresh: an existing file fails
        "ep.context_embed_mode": "0",
    }.items():
        so.add_session_config_entry(key, value)
    start = time.perf_counter()
    sess, text, error = _capture(lambda: ort.InferenceSession(ask["model_path"], so))
    seconds = time.perf_counter() - start
    lines = [ln for ln in text.splitlines() if any(k in ln for k in KEEP)]
    assignment: list[tuple[str, list[tuple[str, str]]]] = []
    active: list[str] = []
    if sess is not None:
        active = list(sess.get_providers())
        assignment = [
            (str(sg.ep_name), [(str(n.name), str(n.op_type)) for n in sg.get_nodes()])
            for sg in sess.get_provider_graph_assignment_info()
        ]
    # ORT's Python wrapper: "EP Error …" then "Falling back to ['CPUExecutionProvider'] and
    # retrying"; ORT's own "Falling back to lenient merge" (shape info) is no fallback.
    fell_back = any("EP Error" in ln or "Falling back to [" in ln for ln in lines)
    if not error and (fell_back or ep not in active):
        said = [ln.strip() for ln in text.splitlines() if "EP Error" in ln or "[E:" in ln]
        error = " ".join(said[:2]) or f"{ep} is not in the session"
    took = any(e == ep and nodes for e, nodes in assignment)
    if not error and not took:  # no dump is written: save ORT's level-1 graph to map names
        basic = ask["basic_path"]
        so2 = ort.SessionOptions()
        so2.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so2.log_severity_level = 3
        so2.optimized_model_filepath = basic
        so2.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name",
            f"{Path(basic).name}.data",
        )
        so2.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
        )
        _capture(
            lambda: ort.InferenceSession(ask["model_path"], so2, providers=["CPUExecutionProvider"])
        )
    return {
        "assignment": assignment,
        "active": active,
        "log": lines,
        "error": error,
        "seconds": seconds,
    }


if __name__ == "__main__":
    request, answer = Path(sys.argv[1]), Path(sys.argv[2])
    answer.write_text(json.dumps(compile_only(json.loads(request.read_text()))))
