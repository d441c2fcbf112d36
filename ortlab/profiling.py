"""ORT profile traces: a robust, fast parser and the :class:`ProfileResult` tables.

The trace is ORT's Chrome-trace JSON: a plain array in 1.31 (``{"traceEvents": …}`` elsewhere),
``ts``/``dur`` in µs, ``args`` numbers stored as strings, events not sorted, ``_fence_before`` /
``_fence_after`` events in older versions. msgspec decodes it straight into small typed structs
and skips every field we do not read (the per-node memory counters, thread stats), which is what
makes 100k-event traces parse in a fraction of a second.

Times measured with profiling on include ORT's per-node profiling overhead (~5 µs/node): use
them for *shares* and per-node comparisons; take latency from :func:`ortlab.benchmark`.
"""

from __future__ import annotations

import codecs
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ortlab._result import Result
from ortlab.errors import ProfileParseError
from ortlab.session import SessionReport

__all__ = ["ProfileData", "ProfileResult", "parse_profile", "parse_profile_file"]


class _Args(msgspec.Struct, gc=False):
    op_name: str = ""
    provider: str = ""
    input_type_shape: msgspec.Raw = msgspec.Raw(b"null")
    output_type_shape: msgspec.Raw = msgspec.Raw(b"null")


class _Event(msgspec.Struct, gc=False):
    """The fields we read. ``args`` stays raw bytes: only one event per node needs decoding.
    ``gc=False``: 100k small acyclic objects need no cycle-collector tracking."""

    name: str = ""
    cat: str = ""
    ts: float = 0
    dur: float = 0
    args: msgspec.Raw = msgspec.Raw(b"null")


class _Trace(msgspec.Struct, gc=False):
    traceEvents: list[_Event]  # noqa: N815 - the Chrome trace format's field name


_DECODER = msgspec.json.Decoder(list[_Event] | _Trace, strict=False)
_ARGS = msgspec.json.Decoder(_Args | None, strict=False)
_SUFFIX = "_kernel_time"
_SESSION_EVENTS = ("model_loading_uri", "model_loading_array", "session_initialization")


@dataclass(frozen=True)
class ProfileData:
    """Columnar node events from one trace (plain lists: JSON- and pickle-friendly)."""

    node: list[str]
    """Node name per distinct node (the final, optimized graph's names)."""
    op_type: list[str]
    provider: list[str]
    input_types: list[list[tuple[str, list[int]]]]
    """Per node: (dtype, dims) of each input, as ORT recorded them at run time."""
    output_types: list[list[tuple[str, list[int]]]]
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


def _types(raw: msgspec.Raw) -> list[tuple[str, list[int]]]:
    """``[{"float": [1, 3]}, …]`` -> ``[("float", [1, 3]), …]`` (tolerant of odd values)."""
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):  # skipped Raw bytes are not UTF-8-checked
        return []
    out: list[tuple[str, list[int]]] = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict):
            for dtype, dims in item.items():
                ok = isinstance(dims, list) and all(
                    isinstance(x, int) and not isinstance(x, bool) for x in dims
                )
                out.append((str(dtype), list(dims) if ok else []))
    return out


def types_text(types: list[tuple[str, list[int]]]) -> str:
    return ", ".join(f"{dtype}{dims}" for dtype, dims in types)


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
    )


CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})


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


def _group_medians(ids: np.ndarray, values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Median of ``values`` per group id (groups without values get NaN), vectorised."""
    order = np.lexsort((values, ids))
    ordered = values[order]
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    lo = starts + np.maximum(counts - 1, 0) // 2
    hi = starts + counts // 2
    safe = counts > 0
    out = np.full(len(counts), np.nan)
    if len(ordered):
        lo_v = ordered[np.minimum(lo, len(ordered) - 1)]
        hi_v = ordered[np.minimum(hi, len(ordered) - 1)]
        out[safe] = (lo_v / 2 + hi_v / 2)[safe]  # halves first: no overflow near float max
    return out


def parse_profile_file(path: str | Path, skip_runs: int = 0) -> ProfileData:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as err:
        raise ProfileParseError(f"Cannot read profile {p}: {err.strerror}.") from err
    return parse_profile(data, skip_runs=skip_runs)


@dataclass(frozen=True)
class ProfileResult(Result):
    """Per-node time from ORT's profiler, with per-op-type and per-EP views.

    Tables (``by_node``, ``by_op_type``, ``by_provider``) are keyed by ORT's node names in the
    *optimized* graph, use ORT's words (op_type, provider) and report µs.
    """

    model: str
    config: dict[str, Any]
    data: ProfileData
    report: SessionReport | None = None
    notes: list[str] = field(default_factory=list)
    feeds: str = ""
    """The inputs the figures come from: names, dtypes, shapes (and how dims were chosen)."""
    synthetic: bool | None = None
    """True when ortlab synthesized those inputs (seeded random values); None if unknown."""

    # ---------------------------------------------------------------- tables

    @property
    def runs(self) -> int:
        return len(self.data.run_us)

    @functools.cached_property
    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        d = self.data
        return (
            np.asarray(d.ev_node, dtype=np.int64),
            np.asarray(d.ev_run, dtype=np.int64),
            np.asarray(d.ev_start_us, dtype=np.float64),
            np.asarray(d.ev_dur_us, dtype=np.float64),
        )

    @functools.cached_property
    def _self_us(self) -> np.ndarray:
        """Per event, its own time (control-flow nodes without their bodies)."""
        return self_durations(self.data)

    @functools.cached_property
    def _top_level_us(self) -> float:
        """All node time, nothing counted twice: the denominator of shares."""
        return float(self._self_us.sum()) or 1.0

    def by_node(self) -> Any:
        """One row per node: node, op_type, provider, calls, median_us, mean_us, total_us
        (as ORT measured it: an If/Loop/Scan's includes its body), self_us (without the body,
        whose nodes are listed too), share (of self_us: shares add up to 1), input_shapes,
        output_shapes; slowest first (by self time)."""
        import pandas as pd

        d = self.data
        ids, _, _, dur = self._arrays
        n = len(d.node)
        calls = np.bincount(ids, minlength=n)
        total = np.bincount(ids, weights=dur, minlength=n)
        own = np.bincount(ids, weights=self._self_us, minlength=n)
        median = _group_medians(ids, dur, calls)
        present = calls > 0
        table = pd.DataFrame(
            {
                "node": d.node,
                "op_type": d.op_type,
                "provider": d.provider,
                "calls": calls,
                "median_us": median,
                "mean_us": np.divide(total, calls, out=np.zeros(n), where=present),
                "total_us": total,
                "self_us": own,
                "share": own / self._top_level_us,
                "input_shapes": [types_text(t) for t in d.input_types],
                "output_shapes": [types_text(t) for t in d.output_types],
            }
        )[present]
        return table.sort_values("self_us", ascending=False, kind="stable").reset_index(drop=True)

    def _grouped(self, keys: list[str]) -> Any:
        """Per group of nodes: nodes, calls, total_us, median over runs of the per-run sum.
        Self times: an If/Loop/Scan counts its own time, its body's nodes their own."""
        import pandas as pd

        d = self.data
        ids, runs, _, _ = self._arrays
        dur = self._self_us
        labels = (
            list(zip(d.op_type, d.provider, strict=True)) if len(keys) == 2 else list(d.provider)
        )
        group_index: dict[Any, int] = {}
        node_group = np.array(  # int64 even when empty: a trace without node events
            [group_index.setdefault(x, len(group_index)) for x in labels], dtype=np.int64
        )
        groups = len(group_index)
        ev_group = node_group[ids] if len(ids) else np.zeros(0, dtype=np.int64)
        n_runs = max(int(runs.max()) + 1 if len(runs) else 1, 1)
        per_run = np.bincount(ev_group * n_runs + runs, weights=dur, minlength=groups * n_runs)
        calls = np.bincount(ev_group, minlength=groups)
        total = np.bincount(ev_group, weights=dur, minlength=groups)
        nodes = np.bincount(
            node_group[np.bincount(ids, minlength=len(d.node)) > 0], minlength=groups
        )
        keys_cols = (
            [[k[0] for k in group_index], [k[1] for k in group_index]]
            if len(keys) == 2
            else [list(group_index)]
        )
        out = pd.DataFrame(dict(zip(keys, keys_cols, strict=True)))
        out["nodes"] = nodes
        out["calls"] = calls
        out["total_us"] = total
        out["median_per_run_us"] = np.median(per_run.reshape(groups, n_runs), axis=1)
        out["share"] = total / self._top_level_us
        out = out[out["calls"] > 0]
        return out.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)

    def by_op_type(self) -> Any:
        """One row per (op_type, provider): nodes, calls, total_us, median_per_run_us, share
        (self times: nothing counted twice, shares add up to 1)."""
        return self._grouped(["op_type", "provider"])

    def by_provider(self) -> Any:
        """One row per execution provider: nodes, calls, total_us, median_per_run_us, share."""
        return self._grouped(["provider"])

    def top_nodes(self, n: int = 10) -> Any:
        """The ``n`` nodes with the most total time (rows of :meth:`by_node`)."""
        return self.by_node().head(n)

    def timeline(self, run: int = 0) -> Any:
        """Node events of one measured run: node, op_type, provider, start_us, dur_us."""
        import pandas as pd

        if not 0 <= run < max(self.runs, 1):
            raise IndexError(f"run {run} out of range: this profile has {self.runs} runs.")
        ids, runs, start, dur = self._arrays
        sel = np.nonzero(runs == run)[0]
        sel = sel[np.argsort(start[sel], kind="stable")]
        d = self.data
        return pd.DataFrame(
            {
                "node": [d.node[i] for i in ids[sel]],
                "op_type": [d.op_type[i] for i in ids[sel]],
                "provider": [d.provider[i] for i in ids[sel]],
                "start_us": start[sel],
                "dur_us": dur[sel],
            }
        )

    def to_pandas(self) -> Any:
        return self.by_node()

    # ---------------------------------------------------------------- display

    def __repr__(self) -> str:
        d = self.data
        med = float(np.median(d.run_us)) if d.run_us else float("nan")
        return (
            f"<ProfileResult {self.model!r}: {len(d.node)} nodes, {self.runs} runs, "
            f"median run {med / 1e3:.3f} ms with profiling on, providers "
            f"{sorted(set(d.provider))}>"
        )

    def _repr_html_(self) -> str:
        from ortlab.render import profile_html

        return profile_html(self)

    def to_text(self, top: int = 15) -> str:
        from ortlab.render import profile_text

        return profile_text(self, top=top)

    def plot(self, kind: str = "op_type", **kwargs: Any) -> Any:
        """A plotly figure: 'op_type' (bar), 'provider' (sunburst EP → op type → node),
        'top' (slowest nodes), 'timeline' (one run, ``run=``)."""
        from ortlab import plots

        return plots.profile_figure(self, kind, **kwargs)


def profile(
    model: Any,
    config: Any = None,
    feeds: Any = None,
    *,
    runs: int = 20,
    warmup: int = 3,
    dims: Any = None,
    progress: Any = True,
    timeout: float | None = None,
) -> ProfileResult:
    """Profile ``runs`` runs of ``model`` under ``config`` with ORT's profiler, in the worker.

    The trace file goes to a private folder in ortlab's cache and is deleted after parsing;
    nothing is written to the working directory.
    """
    from ortlab.engine import run_model_task

    m, cfg, f, out = run_model_task(
        "profile",
        model,
        config,
        feeds,
        dims=dims,
        progress=progress,
        timeout=timeout,
        runs=runs,
        warmup=warmup,
    )
    notes = [
        "Times are measured with ORT's profiler on (about 5 µs of overhead per node): use them "
        "for shares and comparisons between nodes; ortlab.benchmark gives latency.",
        *f.notes,
    ]
    return ProfileResult(
        model=m.name, config=cfg.to_dict(), data=out["data"], report=out["report"], notes=notes,
        feeds=f.describe(), synthetic=f.synthetic,
    )  # fmt: skip
