"""The compiled trace reader (ortlab.engine.tracescan) against msgspec's decoding of the same
bytes: every trace in ORT's one-event-per-line layout gives the same ProfileData both ways,
and every other trace falls back to msgspec whole (same data, same errors)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ortlab.core.errors import ProfileParseError
from ortlab.engine import trace, tracescan
from ortlab.engine.trace import ProfileData

HAS_COMPILER = tracescan._compiler() is not None
needs_compiler = pytest.mark.skipif(not HAS_COMPILER, reason="no C compiler on this machine")


def _with_msgspec(raw: bytes, skip: int = 0) -> ProfileData:
    """The parser with its compiled reader out: every trace decoded as JSON by msgspec."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tracescan, "scan", lambda _raw: None)
        return trace.parse_profile(raw, skip)


def ort_line(e: dict) -> str:
    """One event as ORT 1.31 writes it (profiler.cc: the header's fixed key order and spacing,
    the name a JSON string, then the args object)."""
    return (
        f'{{"cat" : "{e["cat"]}","pid" :{e["pid"]},"tid" :{e["tid"]},"dur" :{e["dur"]},'
        f'"ts" :{e["ts"]},"ph" : "X","name" :{json.dumps(e["name"], ensure_ascii=False)},'
        f'"args" : {json.dumps(e["args"], ensure_ascii=e["ascii"])}}}'
    )


def ort_trace(events: list[dict], newline: str = "\n") -> bytes:
    body = f",{newline}".join(map(ort_line, events))
    return f"[{newline}{body}{newline}]{newline}".encode()


_names = st.sampled_from(["model_run", "session_initialization", "a/MatMul_kernel_time"]) | (
    st.text(max_size=12).map(lambda s: f"{s}_kernel_time")
)
_args = st.fixed_dictionaries(
    {},
    optional={
        "op_name": st.sampled_from(["MatMul", "If", "Gather", "MatMulNBits"]),
        "provider": st.sampled_from(["CPUExecutionProvider", "QNNExecutionProvider"]),
        "output_size": st.integers(0, 10**9).map(str),
        "mem_bytes_in_use": st.integers(0, 10**9).map(str),
        "input_type_shape": st.lists(
            st.dictionaries(st.sampled_from(["float", "int64"]), st.lists(st.integers(0, 64)))
        ),
        "note": st.text(max_size=8),  # quotes, braces, escapes, newlines (escaped by JSON)
    },
)
_event = st.fixed_dictionaries(
    {
        "cat": st.sampled_from(["Node", "Session", "Api"]),
        "pid": st.integers(0, 99999),
        "tid": st.sampled_from([7, 8, 139936804187008]),
        "dur": st.integers(0, 10**6),
        "ts": st.integers(0, 10**9),
        "name": _names,
        "args": _args,
        "ascii": st.booleans(),
    }
)


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    events=st.lists(_event, max_size=25),
    newline=st.sampled_from(["\n", "\r\n"]),
    skip=st.integers(0, 2),
    cut=st.none() | st.integers(0, 4000),
)
def test_both_readers_give_the_same_profile(
    events: list[dict], newline: str, skip: int, cut: int | None
) -> None:
    """ORT-layout traces with any names (quotes, backslashes, control characters, non-ASCII),
    args, threads and times, with LF or CRLF lines, whole or cut anywhere: the parser's answer
    (compiled reader where it can read the trace, msgspec where not) equals msgspec's, error
    included."""
    raw = ort_trace(events, newline)
    if cut is not None:
        raw = raw[: min(cut, len(raw) - 1)]
    try:
        want: ProfileData | str = _with_msgspec(raw, skip)
    except ProfileParseError as err:
        want = str(err)
    try:
        got: ProfileData | str = trace.parse_profile(raw, skip)
    except ProfileParseError as err:
        got = str(err)
    event("compiled reader" if tracescan.scan(raw) is not None else "msgspec")
    assert got == want


@needs_compiler
def test_the_compiled_reader_reads_ort_layout_and_nothing_else() -> None:
    """The layout it reads is ORT's; a string it would have to unescape, a float time, other
    key orders, a wrapped trace, text after the array or a truncated line send the whole trace
    to msgspec (scan returns None)."""
    events = [
        {"cat": "Session", "pid": 1, "tid": 7, "dur": 90, "ts": 10, "name": "model_run"},
        {"cat": "Node", "pid": 1, "tid": 7, "dur": 5, "ts": 20, "name": "a_kernel_time"},
        {"cat": "Node", "pid": 1, "tid": 8, "dur": 6, "ts": 30, "name": "b_kernel_time"},
    ]
    for e in events:
        e.update(args={"op_name": "Relu", "provider": "CPUExecutionProvider"}, ascii=True)
    raw = ort_trace(events)
    lines = tracescan.scan(raw)
    assert lines is not None
    assert lines.strings == ["Session", "model_run", "Node", "a_kernel_time", "b_kernel_time"]
    assert lines.name.tolist() == [1, 3, 4] and lines.cat.tolist() == [0, 2, 2]
    assert lines.tid.tolist() == [7, 7, 8] and lines.ts.tolist() == [10.0, 20.0, 30.0]
    for i, e in enumerate(events):
        args = raw[lines.args_at[i] : lines.args_end[i]]
        assert json.loads(args) == e["args"]
    data = trace.parse_profile(raw)
    assert data.node == ["a", "b"] and data.op_type == ["Relu", "Relu"]
    assert data.threads == ["7", "8"] and data.ev_start_us == [10.0, 20.0]
    off_layout = {
        "escaped name": raw.replace(b'"a_kernel_time"', b'"a\\u0041_kernel_time"'),
        "float time": raw.replace(b'"ts" :20', b'"ts" :20.5'),
        "key order": raw.replace(b'"dur" :5,"ts" :20', b'"ts" :20,"dur" :5'),
        "wrapped": b'{"traceEvents": ' + raw + b"}",
        "text after": raw + b"x",
        "truncated": raw[: raw.rindex(b"}}") + 1],
    }
    for what, text in off_layout.items():
        assert tracescan.scan(text) is None, what
    short = [{**events[1], "args": {}, "ts": 20 + i} for i in range(5000)]  # ~120 bytes a line
    raw_short = ort_trace(short)
    assert len(raw_short) // 256 + 64 < len(short)  # more than the first try's arrays hold
    lines_short = tracescan.scan(raw_short)
    assert lines_short is not None and lines_short.ts.tolist() == [e["ts"] for e in short]
    wrapped = trace.parse_profile(off_layout["wrapped"])
    assert wrapped == data  # the other reader, the same profile
    with pytest.raises(ProfileParseError, match="truncated"):
        trace.parse_profile(off_layout["truncated"])


@pytest.fixture
def fresh_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """An empty cache and no reader loaded yet in this process; restored afterwards."""
    monkeypatch.setenv("ORTLAB_CACHE_DIR", str(tmp_path / "cache"))
    tracescan._loaded.cache_clear()
    yield
    tracescan._loaded.cache_clear()


@needs_compiler
@pytest.mark.usefixtures("fresh_build")
def test_the_reader_is_compiled_once_into_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    assert tracescan._library() is not None
    built = list((tracescan.cache.cache_dir() / "native").iterdir())
    assert len(built) == 1 and built[0].name.startswith("tracescan-")
    assert str(built[0]) in tracescan.status()
    tracescan._loaded.cache_clear()  # a new process: found in the cache, not compiled again

    def compile_again(*args: object, **_: object) -> None:
        raise AssertionError(f"compiled again: {args}")

    monkeypatch.setattr(tracescan.subprocess, "run", compile_again)
    assert tracescan._library() is not None


@pytest.mark.usefixtures("fresh_build")
@pytest.mark.parametrize("how", ["disabled", "no compiler", "compiler fails"])
def test_without_the_compiled_reader_traces_still_parse(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """ORTLAB_NATIVE=0, no C compiler, or one that fails: status says so, and a trace in ORT's
    layout parses with msgspec to the same data."""
    if how == "disabled":
        monkeypatch.setenv("ORTLAB_NATIVE", "0")
    elif how == "no compiler":
        monkeypatch.setattr(tracescan, "_compiler", lambda: None)
    else:
        failing = shutil.which("false")
        if failing is None:
            pytest.skip("no `false` program to stand for a failing compiler")
        monkeypatch.setattr(tracescan, "_compiler", lambda: [failing])
    assert tracescan._library() is None
    text = tracescan.status()
    assert text.startswith("msgspec only: ")
    assert {
        "disabled": "ORTLAB_NATIVE=0",
        "no compiler": "no C compiler",
        "compiler fails": "could not compile",
    }[how] in text
    line = {"cat": "Node", "pid": 1, "tid": 7, "dur": 5, "ts": 20, "name": "n_kernel_time"}
    raw = ort_trace([{**line, "args": {"op_name": "Relu"}, "ascii": True}])
    assert tracescan.scan(raw) is None
    data = trace.parse_profile(raw)
    assert data.node == ["n"] and data.op_type == ["Relu"]
    assert dataclasses.asdict(data) == dataclasses.asdict(_with_msgspec(raw))
