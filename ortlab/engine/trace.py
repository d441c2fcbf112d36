"""ORT profile traces: a robust, fast parser into columnar :class:`ProfileData`.

The trace is ORT's Chrome-trace JSON: a plain array in 1.31 (``{"traceEvents": …}`` elsewhere),
``ts``/``dur`` in µs, ``args`` numbers stored as strings, events not sorted, ``_fence_before`` /
``_fence_after`` events in older versions. msgspec decodes it straight into small typed structs
and skips every field we do not read (the per-node memory counters, thread stats), which is what
makes 100k-event traces parse in a fraction of a second. It lives in the engine because the
worker parses the trace where it was written and sends the columns, not the file; the tables
over it (:class:`~ortlab.analysis.profiling.ProfileResult`) are an analysis.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import numpy as np

from ortlab.core.errors import ProfileParseError
from ortlab.core.onnx_util import CONTROL_FLOW

__all__ = [
    "ProfileData",
    "nested_events",
    "parse_profile",
    "parse_profile_file",
    "self_durations",
    "types_text",
]


class _Args(msgspec.Struct, gc=False):
    op_name: str = ""
    provider: str = ""
    input_type_shape: msgspec.Raw = msgspec.Raw(b"null")
    output_type_shape: msgspec.Raw = msgspec.Raw(b"null")
    # memory, as ORT records it per node event (numbers as strings; absent in old traces)
    output_size: str = ""
    activation_size: str = ""
    parameter_size: str = ""
    mem_bytes_in_use: str = ""
    mem_in_use_peak: str = ""
    mem_arena_held: str = ""


def _int(text: str) -> int:
    """A size field: -1 when ORT did not record it (older traces, other EPs)."""
    try:
        return int(text)
    except ValueError:
        return -1


class _Event(msgspec.Struct, gc=False):
    """The fields we read. ``args`` stays raw bytes: only one event per node needs decoding.
    ``gc=False``: 100k small acyclic objects need no cycle-collector tracking."""

    name: str = ""
    cat: str = ""
    ts: float = 0
    dur: float = 0
    tid: int | str = 0
    """The OS thread the event ran on (an int in ORT 1.31; a string is kept as it is)."""
    args: msgspec.Raw = msgspec.Raw(b"null")


class _Trace(msgspec.Struct, gc=False):
    traceEvents: list[_Event]  # noqa: N815 - the Chrome trace format's field name


_DECODER = msgspec.json.Decoder(list[_Event] | _Trace, strict=False)
_ARGS = msgspec.json.Decoder(_Args | None, strict=False)
_SUFFIX = "_kernel_time"
_SESSION_EVENTS = ("model_loading_uri", "model_loading_array", "session_initialization")


TensorTypes = tuple[tuple[str, tuple[int, ...]], ...]
"""(dtype, dims) per tensor. Tuples of strings and ints: the garbage collector stops tracking
them, so a profile kept in the Lab's history costs no full collection anything (as lists,
~5,600 objects per run of a 1,500-node model, walked by every one)."""


@dataclass(frozen=True)
class ProfileData:
    """Columnar node events from one trace (plain lists: JSON- and pickle-friendly)."""

    node: list[str]
    """Node name per distinct node (the final, optimized graph's names)."""
    op_type: list[str]
    provider: list[str]
    input_types: list[TensorTypes]
    """Per node: (dtype, dims) of each input, as ORT recorded them at run time."""
    output_types: list[TensorTypes]
    ev_node: list[int]
    """Per event: index into the node lists."""
    ev_run: list[int]
    """Per event: measured run index (0-based, warm-up runs removed)."""
    ev_start_us: list[float]
    """Per event: start relative to its run's start."""
    ev_dur_us: list[float]
    run_us: list[float]
    """Duration of each measured ``model_run``."""
    session_init_us: float = 0.0
    model_loading_us: float = 0.0
    skipped_runs: int = 0
    events_total: int = 0
    """All events in the file (every category), for throughput figures."""
    output_bytes: list[int] = field(default_factory=list)
    """Per node, from its event's args (-1 when not recorded): bytes of its outputs."""
    activation_bytes: list[int] = field(default_factory=list)
    """Per node: bytes of its non-weight inputs."""
    parameter_bytes: list[int] = field(default_factory=list)
    """Per node: bytes of its weights (initializer inputs)."""
    in_use_bytes: list[int] = field(default_factory=list)
    """Per node, at its last event (the last measured run): bytes allocated by the EP's
    allocator when the node ran (``mem_bytes_in_use``)."""
    peak_bytes: list[int] = field(default_factory=list)
    """Per node, at its last event: the allocator's peak so far (``mem_in_use_peak``)."""
    arena_bytes: list[int] = field(default_factory=list)
    """Per node, at its last event: bytes the arena held (``mem_arena_held``)."""
    threads: list[str] = field(default_factory=list)
    """The threads node events ran on (ORT's ``tid``, as text), in order of first event."""
    ev_thread: list[int] = field(default_factory=list)
    """Per event: index into ``threads`` (empty for a trace parsed before it existed)."""
    other_cores: float | None = None
    """Cores other processes used on average while the profiled runs ran (warm-up included),
    measured in the worker around its loop; None when not measured or the window was too short
    for the CPU counters (``core.machine.MIN_LOAD_WINDOW_S``)."""
    run_start_us: list[float] = field(default_factory=list)
    """Per measured run: its ``model_run`` start on the trace's clock (µs since profiling
    began), so the time between runs shows; empty for a trace parsed before it existed."""


def _types(raw: msgspec.Raw) -> TensorTypes:
    """``[{"float": [1, 3]}, …]`` -> ``(("float", (1, 3)), …)`` (tolerant of odd values)."""
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):  # skipped Raw bytes are not UTF-8-checked
        return ()
    out: list[tuple[str, tuple[int, ...]]] = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict):
            for dtype, dims in item.items():
                ok = isinstance(dims, list) and all(
                    isinstance(x, int) and not isinstance(x, bool) for x in dims
                )
                out.append((str(dtype), tuple(dims) if ok else ()))
    return tuple(out)


def types_text(types: TensorTypes) -> str:
    """``float[1, 3], int64[2]``."""
    return ", ".join(f"{dtype}[{', '.join(map(str, dims))}]" for dtype, dims in types)


def parse_profile(data: bytes | str, skip_runs: int = 0) -> ProfileData:
    """Parse an ORT trace; drop the first ``skip_runs`` ``model_run``s (warm-up)."""
    if skip_runs < 0:
        raise ValueError(f"skip_runs must be >= 0 (the warm-up runs to drop), not {skip_runs}.")
    try:
        raw = data.encode() if isinstance(data, str) else data
    except UnicodeEncodeError as err:  # a lone surrogate: no JSON file holds one
        raise ProfileParseError(
            f"Not an ORT profile: the text holds a character UTF-8 cannot encode ({err.reason} "
            f"at {err.start}). Pass the file's bytes, or use ortlab.parse_profile_file(path)."
        ) from err
    if raw.startswith(codecs.BOM_UTF8):  # a trace re-saved by an editor: still UTF-8 JSON
        raw = raw[len(codecs.BOM_UTF8) :]
    if not raw or raw.isspace():  # isspace stops at the first byte: no copy of a big trace
        raise ProfileParseError("The profile is empty: ORT writes it only on end_profiling().")
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise ProfileParseError(
            "The profile is UTF-16 text (re-saved by Windows PowerShell or an editor?); ORT "
            "writes UTF-8 JSON. Parse the file ORT wrote, or re-save this one as UTF-8."
        )
    try:
        decoded = _DECODER.decode(raw)
    except UnicodeDecodeError as err:
        raise ProfileParseError(
            f"Not an ORT profile: a string in it is not valid UTF-8 ({err.reason}; "
            f"{len(raw):,} bytes). ORT writes profiles as UTF-8 JSON: is this a binary file, or "
            "a trace re-saved in another encoding?"
        ) from err
    except msgspec.DecodeError as err:
        text = str(err)
        if "truncated" in text.lower():
            raise ProfileParseError(
                f"The profile is truncated ({len(raw):,} bytes; {text}). ORT was probably "
                "stopped before end_profiling() finished writing; profile again."
            ) from err
        raise ProfileParseError(
            f"Not an ORT profile: {text}. ORT profiles are JSON arrays of Chrome trace events "
            "(or {'traceEvents': [...]})."
        ) from err
    events = decoded.traceEvents if isinstance(decoded, _Trace) else decoded
    return _columns(events, skip_runs)


def _node_args(raw: msgspec.Raw) -> _Args:
    try:
        return _ARGS.decode(raw) or _Args()
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return _Args()


def _columns(events: list[_Event], skip_runs: int) -> ProfileData:
    runs = sorted((e.ts, e.dur) for e in events if e.cat == "Session" and e.name == "model_run")
    session = {e.name: e.dur for e in events if e.cat == "Session" and e.name in _SESSION_EVENTS}
    skip = min(skip_runs, len(runs))
    measured = runs[skip:]
    # Node events only: the fence events of older ORT versions do not end in _kernel_time.
    node_ev = [e for e in events if e.cat == "Node" and e.name.endswith(_SUFFIX)]
    cut = len(_SUFFIX)
    index: dict[str, int] = {}
    ids = np.fromiter(
        (index.setdefault(e.name[:-cut], len(index)) for e in node_ev), np.int64, len(node_ev)
    )
    firsts: dict[int, _Event] = {}
    for k, e in zip(ids.tolist(), node_ev, strict=True):
        if k not in firsts:
            firsts[k] = e
            if len(firsts) == len(index):
                break
    args = [_node_args(firsts[k].args) for k in range(len(index))]
    lasts: dict[int, _Event] = {}  # the allocator's state in the last run: one decode per node
    for k, e in zip(reversed(ids.tolist()), reversed(node_ev), strict=True):
        if k not in lasts:
            lasts[k] = e
            if len(lasts) == len(index):
                break
    late = [_node_args(lasts[k].args) for k in range(len(index))]
    thread_index: dict[int | str, int] = {}
    tids = np.fromiter(
        (thread_index.setdefault(e.tid, len(thread_index)) for e in node_ev),
        np.int64,
        len(node_ev),
    )
    ts = np.fromiter((e.ts for e in node_ev), np.float64, len(node_ev))
    dur = np.fromiter((e.dur for e in node_ev), np.float64, len(node_ev))
    if runs:
        starts = np.array([r[0] for r in measured], dtype=np.float64)
        ends = np.array([r[0] + r[1] for r in measured], dtype=np.float64)
        run_of = np.searchsorted(starts, ts, side="right") - 1
        keep = run_of >= 0
        keep[keep] &= ts[keep] <= ends[run_of[keep]]
    else:  # a trace without model_run events: every node event counts as run 0
        starts = np.zeros(1)
        run_of = np.zeros(len(ts), dtype=np.int64)
        keep = np.ones(len(ts), dtype=bool)
    sel = np.nonzero(keep)[0]
    return ProfileData(
        node=list(index),
        op_type=[a.op_name or "?" for a in args],
        provider=[a.provider or "?" for a in args],
        input_types=[_types(a.input_type_shape) for a in args],
        output_types=[_types(a.output_type_shape) for a in args],
        ev_node=ids[sel].tolist(),
        ev_run=run_of[sel].tolist(),
        ev_start_us=(ts[sel] - starts[run_of[sel]]).tolist(),
        ev_dur_us=dur[sel].tolist(),
        run_us=[float(r[1]) for r in measured],
        session_init_us=float(session.get("session_initialization", 0.0)),
        model_loading_us=float(
            session.get("model_loading_uri", session.get("model_loading_array", 0.0))
        ),
        skipped_runs=skip,
        events_total=len(events),
        output_bytes=[_int(a.output_size) for a in args],
        activation_bytes=[_int(a.activation_size) for a in args],
        parameter_bytes=[_int(a.parameter_size) for a in args],
        in_use_bytes=[_int(a.mem_bytes_in_use) for a in late],
        peak_bytes=[_int(a.mem_in_use_peak) for a in late],
        arena_bytes=[_int(a.mem_arena_held) for a in late],
        threads=[str(t) for t in thread_index],
        ev_thread=tids[sel].tolist(),
        run_start_us=[float(r[0]) for r in measured],
    )


def nested_events(d: ProfileData) -> np.ndarray:
    """Per event: True when it ran inside a control-flow node's event (an If/Loop/Scan body
    node) of the same run."""
    return _nesting(d)[0] >= 0


def self_durations(d: ProfileData) -> np.ndarray:
    """Per event: its own time. An If/Loop/Scan event's duration includes the events of its
    body, which are listed too; its self time is what is left after subtracting the events
    directly inside it. Self times add up to the run's node time with nothing counted twice,
    so every share ortlab shows is taken over them."""
    parent, dur = _nesting(d)
    own = dur.copy()
    inside = np.nonzero(parent >= 0)[0]
    np.subtract.at(own, parent[inside], dur[inside])
    return np.asarray(np.maximum(own, 0.0), dtype=np.float64)


def per_run_grid(d: ProfileData) -> np.ndarray:
    """Each node's own time in each measured run, µs: a (nodes x runs) array in the order of
    ``d.node`` (a node that runs several times in a run, in a Loop body, sums them)."""
    ids = np.asarray(d.ev_node, dtype=np.int64)
    runs = np.asarray(d.ev_run, dtype=np.int64)
    n_nodes = len(d.node)
    n_runs = max(len(d.run_us), int(runs.max()) + 1 if runs.size else 1, 1)
    grid = np.bincount(ids * n_runs + runs, weights=self_durations(d), minlength=n_nodes * n_runs)
    return grid.reshape(n_nodes, n_runs)


def node_us_per_run(d: ProfileData) -> np.ndarray:
    """THE time of a node, in every table, tab, graph, report and CLI line: the median over
    the profiled runs of its own (self) time in a run, µs, profiling on. Per node of
    ``d.node``; a node's share is this over the sum of all nodes' (the median run's node
    time), so shares add up to 1 and one stalled run moves no node."""
    grid = per_run_grid(d)
    return np.median(grid, axis=1) if grid.size else np.zeros(len(d.node))


def _nesting(d: ProfileData) -> tuple[np.ndarray, np.ndarray]:
    """(innermost enclosing control-flow event per event or -1, durations)."""
    ids = np.asarray(d.ev_node, dtype=np.int64)
    dur = np.asarray(d.ev_dur_us, dtype=np.float64)
    parent = np.full(len(ids), -1, dtype=np.int64)
    flow = [i for i, op in enumerate(d.op_type) if op in CONTROL_FLOW]
    if not flow or not len(ids):
        return parent, dur
    run = np.asarray(d.ev_run, dtype=np.int64)
    start = np.asarray(d.ev_start_us, dtype=np.float64)
    end = start + dur
    outer = np.nonzero(np.isin(ids, flow))[0]
    for k in outer[np.argsort(-dur[outer], kind="stable")]:  # widest first: innermost wins
        inside = (run == run[k]) & (start >= start[k]) & (end <= end[k])
        inside[k] = False
        parent[inside] = k
    return parent, dur


def parse_profile_file(path: str | Path, skip_runs: int = 0) -> ProfileData:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as err:
        raise ProfileParseError(f"Cannot read profile {p}: {err.strerror}.") from err
    return parse_profile(data, skip_runs=skip_runs)
