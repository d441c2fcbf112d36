"""ORT profile traces: a robust, fast parser into columnar :class:`ProfileData`.

The trace is ORT's Chrome-trace JSON: a plain array in 1.31 (``{"traceEvents": …}`` elsewhere),
``ts``/``dur`` in µs, ``args`` numbers stored as strings, events not sorted, ``_fence_before`` /
``_fence_after`` events in older versions. msgspec reads it: it decodes every event into small
typed structs, skipping the fields we do not read, exactly as strict as JSON (a missing comma
between events, a trailing comma, a stray brace: refused, with the reason), and refuses what is
not a profile with the reason. (A compiled line reader once read ORT's own layout ~4x faster;
it was compiled on first use into a writable cache and loaded from there, which no code ortlab
runs may be: issue 47. Its speed is not worth that.)

A big file is memory-mapped and read in place. The columns are then built a column at a time
(dict lookups and numpy in C, no Python loop per event) and kept as numpy arrays beside the
lists for every table to read; only a node's first and last event's ``args`` are decoded. A
100k-event trace (~93 MB) parses in ~0.25 s on 2 EPYC vCPUs (``benchmarks/profile_parse.py``).
It lives in the engine because the worker parses
the trace where it was written and sends the columns, not the file; the tables over it
(:class:`~ortlab.analysis.profiling.ProfileResult`) are an analysis.
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import functools
import mmap
import os
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, TypeVar

import msgspec
import numpy as np

from ortlab.core.errors import ProfileParseError
from ortlab.core.onnx_util import CONTROL_FLOW

__all__ = [
    "EventArrays",
    "ProfileData",
    "nested_events",
    "parse_profile",
    "parse_profile_file",
    "select_runs",
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
_NAME, _CAT, _TS, _DUR, _TID = map(attrgetter, ("name", "cat", "ts", "dur", "tid"))
_ARGS = msgspec.json.Decoder(_Args | None, strict=False)
_SUFFIX = "_kernel_time"
_BLANK = re.compile(rb"\s*\Z")
_SESSION_EVENTS = ("model_loading_uri", "model_loading_array", "session_initialization")


TensorTypes = tuple[tuple[str, tuple[int, ...]], ...]
"""(dtype, dims) per tensor. Tuples of strings and ints: the garbage collector stops tracking
them, so a profile kept in the Lab's history costs no full collection anything (as lists,
~5,600 objects per run of a 1,500-node model, walked by every one)."""


class EventArrays(NamedTuple):
    """A trace's per-event columns as read-only numpy arrays (see :attr:`ProfileData.events`)."""

    node: np.ndarray
    """int64: index into the node lists."""
    run: np.ndarray
    """int64: measured run index."""
    start_us: np.ndarray
    """float64: start relative to the event's run."""
    dur_us: np.ndarray
    """float64: the event's duration as ORT measured it."""


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

    @functools.cached_property
    def events(self) -> EventArrays:
        """The event columns as numpy arrays, made once per ProfileData (the parser hands over
        the arrays it built the lists from): every table and grid reads these instead of
        converting the 100k-long lists again. Read-only; not pickled (rebuilt on demand)."""
        return _frozen(
            EventArrays(
                np.asarray(self.ev_node, dtype=np.int64),
                np.asarray(self.ev_run, dtype=np.int64),
                np.asarray(self.ev_start_us, dtype=np.float64),
                np.asarray(self.ev_dur_us, dtype=np.float64),
            )
        )

    @functools.cached_property
    def own_us(self) -> np.ndarray:
        """Per event, its own time (see :func:`self_durations`), computed once. Read-only."""
        parent, dur = _nesting(self)
        own = dur.copy()
        inside = np.nonzero(parent >= 0)[0]
        np.subtract.at(own, parent[inside], dur[inside])
        out: np.ndarray = np.maximum(own, 0.0)
        out.flags.writeable = False
        return out

    def __getstate__(self) -> dict[str, object]:
        """The fields only: the cached arrays are a view of them, not worth sending."""
        return {k: v for k, v in self.__dict__.items() if k not in _CACHED}


_CACHED = frozenset(  # the cached properties: views of the fields, rebuilt on demand
    k for k, v in vars(ProfileData).items() if isinstance(v, functools.cached_property)
)


def _frozen(arrays: EventArrays) -> EventArrays:
    for a in arrays:
        a.flags.writeable = False
    return arrays


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


def parse_profile(data: bytes | str | memoryview | mmap.mmap, skip_runs: int = 0) -> ProfileData:
    """Parse an ORT trace (its bytes, text, or any buffer such as a memory-mapped file); drop
    the first ``skip_runs`` ``model_run``s (warm-up)."""
    if skip_runs < 0:
        raise ValueError(f"skip_runs must be >= 0 (the warm-up runs to drop), not {skip_runs}.")
    try:
        raw = data.encode() if isinstance(data, str) else data
    except UnicodeEncodeError as err:  # a lone surrogate: no JSON file holds one
        raise ProfileParseError(
            f"Not an ORT profile: the text holds a character UTF-8 cannot encode ({err.reason} "
            f"at {err.start}). Pass the file's bytes, or use ortlab.parse_profile_file(path)."
        ) from err
    head = bytes(raw[:4])  # a slice: no copy of a big trace, whatever the buffer
    if head.startswith(codecs.BOM_UTF8):  # a trace re-saved by an editor: still UTF-8 JSON
        raw = memoryview(raw)[len(codecs.BOM_UTF8) :]
    if _BLANK.match(raw):  # stops at the first byte that is not blank
        raise ProfileParseError("The profile is empty: ORT writes it only on end_profiling().")
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise ProfileParseError(
            "The profile is UTF-16 text (re-saved by Windows PowerShell or an editor?); ORT "
            "writes UTF-8 JSON. Parse the file ORT wrote, or re-save this one as UTF-8."
        )
    return _columns(_from_events(_decoded(raw)), skip_runs)


def _not_utf8(reason: str, raw: bytes | memoryview | mmap.mmap) -> ProfileParseError:
    return ProfileParseError(
        f"Not an ORT profile: a string in it is not valid UTF-8 ({reason}; {len(raw):,} "
        "bytes). ORT writes profiles as UTF-8 JSON: is this a binary file, or a trace re-saved "
        "in another encoding?"
    )


def _decoded(raw: bytes | memoryview | mmap.mmap) -> list[_Event]:
    """Every event, decoded as JSON (any layout); what is not an ORT profile is refused."""
    try:
        decoded = _DECODER.decode(raw)
    except UnicodeDecodeError as err:  # msgspec < 0.23
        raise _not_utf8(err.reason, raw) from err
    except msgspec.DecodeError as err:
        text = str(err)
        if "utf-8" in text.lower():  # msgspec >= 0.23: 'Invalid UTF-8 encoded string'
            raise _not_utf8(text, raw) from err
        if "truncated" in text.lower():
            raise ProfileParseError(
                f"The profile is truncated ({len(raw):,} bytes; {text}). ORT was probably "
                "stopped before end_profiling() finished writing; profile again."
            ) from err
        raise ProfileParseError(
            f"Not an ORT profile: {text}. ORT profiles are JSON arrays of Chrome trace events "
            "(or {'traceEvents': [...]})."
        ) from err
    return decoded.traceEvents if isinstance(decoded, _Trace) else decoded


def _node_args(raw: msgspec.Raw) -> _Args:
    try:
        return _ARGS.decode(raw) or _Args()
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return _Args()


H = TypeVar("H", bound=Hashable)


def _codes(values: list[H]) -> tuple[np.ndarray, list[H]]:
    """Per value, the index of its first appearance; and the distinct values in that order.
    Dict lookups in C over the whole column: no Python loop per event."""
    distinct = list(dict.fromkeys(values))
    where = {v: i for i, v in enumerate(distinct)}
    return np.fromiter(map(where.__getitem__, values), np.int64, len(values)), distinct


def _renumbered(codes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``codes`` (each < ``size``) renumbered 0, 1, … in order of first appearance: (the new
    codes, the old code of each new one, the position of each one's first appearance)."""
    old, first = np.unique(codes, return_index=True)
    order = np.argsort(first, kind="stable")
    old, first = old[order], first[order]
    new = np.zeros(size, dtype=np.int64)
    new[old] = np.arange(len(old))
    return new[codes], old, first


class _Columns(NamedTuple):
    """Per event of a trace, as msgspec read it."""

    strings: list[str]
    """The distinct names and categories."""
    name: np.ndarray
    """int64: index into ``strings``."""
    cat: np.ndarray
    """int64: index into ``strings``."""
    tid: np.ndarray
    """int64: index into ``tids``."""
    tids: list[int | str]
    ts: np.ndarray
    dur: np.ndarray
    args: Callable[[int], Any]
    """Event ``i``'s raw ``args`` JSON (only a node's first and last event are decoded)."""


def _from_events(events: list[_Event]) -> _Columns:
    name_code, names = _codes(list(map(_NAME, events)))
    cat_code, cats = _codes(list(map(_CAT, events)))
    tid_code, tids = _codes(list(map(_TID, events)))
    count = len(events)
    return _Columns(
        names + cats,
        name_code,
        cat_code + len(names),
        tid_code,
        tids,
        np.fromiter(map(_TS, events), np.float64, count),
        np.fromiter(map(_DUR, events), np.float64, count),
        lambda i: events[i].args,
    )


def _columns(c: _Columns, skip_runs: int) -> ProfileData:
    count = len(c.ts)
    names = c.strings
    at = np.flatnonzero(_isin(c.cat, names, ("Session",)))
    session_ev: list[tuple[str, float, float]] = list(
        zip(
            [names[k] for k in c.name[at].tolist()],
            c.ts[at].tolist(),
            c.dur[at].tolist(),
            strict=True,
        )
    )
    runs = sorted((ts, dur) for name, ts, dur in session_ev if name == "model_run")
    session = {name: dur for name, _, dur in session_ev if name in _SESSION_EVENTS}
    skip = min(skip_runs, len(runs))
    measured = runs[skip:]
    # Node events only: the fence events of older ORT versions do not end in _kernel_time.
    kernel = np.array([n.endswith(_SUFFIX) for n in names], dtype=bool)
    where = np.flatnonzero(_isin(c.cat, names, ("Node",)) & kernel[c.name])
    ids, node_code, firsts = _renumbered(c.name[where], len(names))
    _, last_rev = np.unique(c.name[where][::-1], return_index=True)
    last = len(where) - 1 - last_rev  # each node's last event, as a position in ``where``
    lasts = np.zeros(len(node_code), dtype=np.int64)
    lasts[ids[last]] = last
    args = [_node_args(c.args(i)) for i in where[firsts].tolist()]
    late = [_node_args(c.args(i)) for i in where[lasts].tolist()]  # allocator, last run
    ev_thread, thread_code, _ = _renumbered(c.tid[where], len(c.tids))
    ts = c.ts[where]
    dur = c.dur[where]
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
    arrays = _frozen(EventArrays(ids[sel], run_of[sel], ts[sel] - starts[run_of[sel]], dur[sel]))
    cut = len(_SUFFIX)
    data = ProfileData(
        node=[names[k][:-cut] for k in node_code.tolist()],
        op_type=[a.op_name or "?" for a in args],
        provider=[a.provider or "?" for a in args],
        input_types=[_types(a.input_type_shape) for a in args],
        output_types=[_types(a.output_type_shape) for a in args],
        ev_node=arrays.node.tolist(),
        ev_run=arrays.run.tolist(),
        ev_start_us=arrays.start_us.tolist(),
        ev_dur_us=arrays.dur_us.tolist(),
        run_us=[float(r[1]) for r in measured],
        session_init_us=float(session.get("session_initialization", 0.0)),
        model_loading_us=float(
            session.get("model_loading_uri", session.get("model_loading_array", 0.0))
        ),
        skipped_runs=skip,
        events_total=count,
        output_bytes=[_int(a.output_size) for a in args],
        activation_bytes=[_int(a.activation_size) for a in args],
        parameter_bytes=[_int(a.parameter_size) for a in args],
        in_use_bytes=[_int(a.mem_bytes_in_use) for a in late],
        peak_bytes=[_int(a.mem_in_use_peak) for a in late],
        arena_bytes=[_int(a.mem_arena_held) for a in late],
        threads=[str(c.tids[k]) for k in thread_code.tolist()],
        ev_thread=ev_thread[sel].tolist(),
        run_start_us=[float(r[0]) for r in measured],
    )
    data.__dict__["events"] = arrays  # the cached_property's slot: the arrays the lists came from
    return data


def _isin(codes: np.ndarray, distinct: list[str], wanted: tuple[str, ...]) -> np.ndarray:
    """Per event, whether its value (``distinct[code]``) is one of ``wanted``."""
    table = np.array([v in wanted for v in distinct], dtype=bool)
    return np.asarray(table[codes], dtype=bool)


def nested_events(d: ProfileData) -> np.ndarray:
    """Per event: True when it ran inside a control-flow node's event (an If/Loop/Scan body
    node) of the same run."""
    return _nesting(d)[0] >= 0


def self_durations(d: ProfileData) -> np.ndarray:
    """Per event: its own time. An If/Loop/Scan event's duration includes the events of its
    body, which are listed too; its self time is what is left after subtracting the events
    directly inside it. Self times add up to the run's node time with nothing counted twice,
    so every share ortlab shows is taken over them. Read-only (computed once per data)."""
    return d.own_us


def per_run_grid(d: ProfileData) -> np.ndarray:
    """Each node's own time in each measured run, µs: a (nodes x runs) array in the order of
    ``d.node`` (a node that runs several times in a run, in a Loop body, sums them)."""
    ids, runs = d.events.node, d.events.run
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


def select_runs(d: ProfileData, runs: Sequence[int]) -> ProfileData:
    """The same trace with only ``runs`` (measured run indices, in that order), renumbered
    0, 1, …: their events, run times and starts; the node lists stay whole (a node none of
    them ran has no event, so no time). What the parser read at a node's first event (its
    tensors' shapes and bytes) may describe a run outside ``runs`` (a warm-up, a step of
    other shapes): it is left out, as not recorded. The weights' bytes, the allocator's
    columns (a node's last event in the trace), the session figures and the load stay."""
    keep = [int(r) for r in runs]
    where = np.full(max(len(d.run_us), 1), -1, dtype=np.int64)
    where[keep] = np.arange(len(keep))
    e = d.events
    picked = np.nonzero(where[e.run] >= 0)[0]
    picked = picked[np.argsort(where[e.run[picked]], kind="stable")]
    return dataclasses.replace(
        d,
        ev_node=e.node[picked].tolist(),
        ev_run=where[e.run[picked]].tolist(),
        ev_start_us=e.start_us[picked].tolist(),
        ev_dur_us=e.dur_us[picked].tolist(),
        ev_thread=[d.ev_thread[i] for i in picked] if d.ev_thread else [],
        input_types=[() for _ in d.node],
        output_types=[() for _ in d.node],
        output_bytes=[-1 for _ in d.output_bytes],
        activation_bytes=[-1 for _ in d.activation_bytes],
        run_us=[d.run_us[r] for r in keep],
        run_start_us=[d.run_start_us[r] for r in keep] if d.run_start_us else [],
    )


def _nesting(d: ProfileData) -> tuple[np.ndarray, np.ndarray]:
    """(innermost enclosing control-flow event per event or -1, durations)."""
    ids, run, start, dur = d.events
    parent = np.full(len(ids), -1, dtype=np.int64)
    flow = [i for i, op in enumerate(d.op_type) if op in CONTROL_FLOW]
    if not flow or not len(ids):
        return parent, dur
    end = start + dur
    outer = np.nonzero(np.isin(ids, flow))[0]
    for k in outer[np.argsort(-dur[outer], kind="stable")]:  # widest first: innermost wins
        inside = (run == run[k]) & (start >= start[k]) & (end <= end[k])
        inside[k] = False
        parent[inside] = k
    return parent, dur


def parse_profile_file(path: str | Path, skip_runs: int = 0) -> ProfileData:
    """Parse the trace at ``path``. A big one is memory-mapped rather than read: the readers
    read the page cache in place, with no 100 MB copy (a third of a big trace's msgspec parse
    time was that copy). Like any mapped file, one truncated by another process while
    it is parsed would stop the process, which ORT's finished traces never are."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            data: bytes | mmap.mmap = _mapped(f) if size >= MAP_FROM_BYTES else f.read()
    except OSError as err:
        raise ProfileParseError(f"Cannot read profile {p}: {err.strerror}.") from err
    try:
        return parse_profile(data, skip_runs=skip_runs)
    finally:
        if isinstance(data, mmap.mmap):
            with contextlib.suppress(BufferError):  # a view still held: unmapped when freed
                data.close()


MAP_FROM_BYTES = 4 << 20
"""Traces from this size up are memory-mapped by :func:`parse_profile_file`."""


def _mapped(f: BinaryIO) -> mmap.mmap:
    """The file mapped read-only, its pages faulted in up front where Linux can
    (``MAP_POPULATE``: one call instead of a fault per 4 KiB page as the decoder walks)."""
    if hasattr(mmap, "MAP_POPULATE"):
        flags = mmap.MAP_SHARED | mmap.MAP_POPULATE
        return mmap.mmap(f.fileno(), 0, flags=flags, prot=mmap.PROT_READ)
    return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
