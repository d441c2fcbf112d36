"""ORT's traces are read by one reader, exactly as strict as JSON (issue 47 item 3): a trace in
ORT 1.31's own layout with a missing comma between events, a trailing comma, or a stray brace
after an event's args is refused with the JSON error's reason — the compiled line reader that
was here accepted all three, giving '?' op types. And no code is compiled or loaded at run time:
nothing in the package loads a shared library or calls a compiler; the environment every
travelling result carries names the reader."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import ortlab
from ortlab.core.errors import ProfileParseError
from ortlab.core.machine import environment
from ortlab.engine import trace

PACKAGE = Path(ortlab.__file__).parent


def ort_line(e: dict) -> str:
    """One event as ORT 1.31 writes it (profiler.cc: the header's fixed key order and spacing,
    the name a JSON string, then the args object)."""
    return (
        f'{{"cat" : "{e["cat"]}","pid" :1,"tid" :{e["tid"]},"dur" :{e["dur"]},'
        f'"ts" :{e["ts"]},"ph" : "X","name" :{json.dumps(e["name"])},'
        f'"args" : {json.dumps(e["args"])}}}'
    )


EVENTS = [
    {"cat": "Session", "tid": 7, "dur": 100, "ts": 0, "name": "model_run", "args": {}},
    {
        "cat": "Node",
        "tid": 7,
        "dur": 5,
        "ts": 20,
        "name": "a_kernel_time",
        "args": {"op_name": "Relu", "provider": "CPUExecutionProvider"},
    },
    {
        "cat": "Node",
        "tid": 8,
        "dur": 6,
        "ts": 30,
        "name": "b_kernel_time",
        "args": {"op_name": "MatMul", "provider": "CPUExecutionProvider"},
    },
]


def ort_trace(lines: list[str]) -> bytes:
    return ("[\n" + ",\n".join(lines) + "\n]\n").encode()


def test_a_trace_in_orts_layout_reads_as_json_reads_it() -> None:
    data = trace.parse_profile(ort_trace([ort_line(e) for e in EVENTS]))
    assert data.node == ["a", "b"] and data.op_type == ["Relu", "MatMul"]
    assert data.threads == ["7", "8"] and data.ev_start_us == [20.0, 30.0]


@pytest.mark.parametrize(
    "broken",
    [
        "missing comma between events",
        "trailing comma",
        "extra brace after args",
        "truncated",
    ],
)
def test_malformed_traces_are_refused_as_json_refuses_them(broken: str) -> None:
    lines = [ort_line(e) for e in EVENTS]
    if broken == "missing comma between events":
        raw = ("[\n" + lines[0] + ",\n" + lines[1] + "\n" + lines[2] + "\n]\n").encode()
    elif broken == "trailing comma":
        raw = ("[\n" + ",\n".join(lines) + ",\n]\n").encode()
    elif broken == "extra brace after args":
        lines[1] = lines[1][:-1] + "}}"
        raw = ort_trace(lines)
    else:
        raw = ort_trace(lines)[:-20]
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)  # the reference: JSON itself refuses each
    with pytest.raises(ProfileParseError, match="truncated" if broken == "truncated" else "JSON"):
        trace.parse_profile(raw)


def test_no_code_is_compiled_or_loaded_at_run_time() -> None:
    """Nothing in the package calls a C compiler or loads a shared library from a path (cffi,
    importlib's extension loaders, ctypes.CDLL of anything but the system's libc, which the
    worker asks to signal it when its parent dies): every line of its Python is read here."""
    banned = re.compile(
        r"\bcffi\b|ExtensionFileLoader|LoadLibrary|\bCDLL\((?!\"libc\.so\.6\")"
        r"|\[\s*['\"](cc|gcc|clang)['\"]|['\"]-shared['\"]"
    )
    found = [
        f"{path.relative_to(PACKAGE)}:{k}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for k, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if banned.search(line)
    ]
    assert found == []
    assert not list(PACKAGE.rglob("*.c")) and not list(PACKAGE.rglob("*.so"))


def test_the_environment_names_the_trace_reader() -> None:
    from importlib.metadata import version

    assert environment()["trace reader"] == f"msgspec {version('msgspec')} (as strict as JSON)"
