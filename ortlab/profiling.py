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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ortlab._result import Result
from ortlab.errors import ProfileParseError
from ortlab.session import SessionReport

__all__ = ["ProfileData", "ProfileResult", "parse_profile", "parse_profile_file"]


class _Args(msgspec.Struct, omit_defaults=True):
    op_name: str = ""
    provider: str = ""
    input_type_shape: msgspec.Raw = msgspec.Raw(b"null")
    output_type_shape: msgspec.Raw = msgspec.Raw(b"null")


class _Event(msgspec.Struct):
    name: str = ""
    cat: str = ""
    ph: str = "X"
    ts: float = 0
    dur: float = 0
    args: _Args | None = None


class _Trace(msgspec.Struct):
    traceEvents: list[_Event]  # noqa: N815 - the Chrome trace format's field name


_DECODER = msgspec.json.Decoder(list[_Event] | _Trace, strict=False)
_SUFFIX = "_kernel_time"
_SESSION_EVENTS = ("model_loading_uri", "model_loading_array", "session_initialization")


@dataclass(frozen=True)
class ProfileData:
    """Columnar node events from one trace (plain lists: JSON- and pickle-friendly)."""

    node: list[str]
    """Node name per distinct node (the final, optimized graph's names)."""
    op_type: list[str]
    provider: list[str]
    input_shapes: list[str]
    output_shapes: list[str]
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


def _shape_text(raw: msgspec.Raw) -> str:
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return ""
    if not isinstance(value, list):
        return ""
    parts = []
    for item in value:
        if isinstance(item, dict):
            for dtype, dims in item.items():
                parts.append(f"{dtype}{list(dims) if isinstance(dims, list) else dims}")
    return ", ".join(parts)


def parse_profile(data: bytes | str, skip_runs: int = 0) -> ProfileData:
    """Parse an ORT trace; drop the first ``skip_runs`` ``model_run``s (warm-up)."""
    raw = data.encode() if isinstance(data, str) else data
    if not raw.strip():
        raise ProfileParseError("The profile is empty: ORT writes it only on end_profiling().")
    try:
        decoded = _DECODER.decode(raw)
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


def _columns(events: list[_Event], skip_runs: int) -> ProfileData:
    runs = sorted((e.ts, e.dur) for e in events if e.cat == "Session" and e.name == "model_run")
    session = {e.name: e.dur for e in events if e.cat == "Session" and e.name in _SESSION_EVENTS}
    skip = min(skip_runs, len(runs))
    measured = runs[skip:]
    starts = np.array([r[0] for r in measured], dtype=np.float64)
    ends = np.array([r[0] + r[1] for r in measured], dtype=np.float64)
    index: dict[str, int] = {}
    nodes: list[str] = []
    op_types: list[str] = []
    providers: list[str] = []
    in_shapes: list[str] = []
    out_shapes: list[str] = []
    ev_node: list[int] = []
    ev_ts: list[float] = []
    ev_dur: list[float] = []
    for e in events:
        if e.cat != "Node" or not e.name.endswith(_SUFFIX):
            continue  # session events, and the fence events of older ORT versions
        name = e.name[: -len(_SUFFIX)]
        k = index.get(name)
        if k is None:
            k = index[name] = len(nodes)
            args = e.args or _Args()
            nodes.append(name)
            op_types.append(args.op_name or "?")
            providers.append(args.provider or "?")
            in_shapes.append(_shape_text(args.input_type_shape))
            out_shapes.append(_shape_text(args.output_type_shape))
        ev_node.append(k)
        ev_ts.append(e.ts)
        ev_dur.append(e.dur)
    ts = np.asarray(ev_ts, dtype=np.float64)
    run_of = np.searchsorted(starts, ts, side="right") - 1
    keep = (run_of >= 0) & (ts <= ends[np.clip(run_of, 0, None)] if len(ends) else False)
    if not runs:  # a trace without model_run events: keep every node event as run 0
        keep = np.ones(len(ts), dtype=bool)
        run_of = np.zeros(len(ts), dtype=np.int64)
        starts = np.zeros(1)
    sel = np.nonzero(keep)[0]
    return ProfileData(
        node=nodes,
        op_type=op_types,
        provider=providers,
        input_shapes=in_shapes,
        output_shapes=out_shapes,
        ev_node=np.asarray(ev_node, dtype=np.int64)[sel].tolist(),
        ev_run=run_of[sel].astype(np.int64).tolist(),
        ev_start_us=(ts[sel] - starts[run_of[sel]]).tolist(),
        ev_dur_us=np.asarray(ev_dur, dtype=np.float64)[sel].tolist(),
        run_us=[float(r[1]) for r in measured],
        session_init_us=float(session.get("session_initialization", 0.0)),
        model_loading_us=float(
            session.get("model_loading_uri", session.get("model_loading_array", 0.0))
        ),
        skipped_runs=skip,
        events_total=len(events),
    )


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

    # ---------------------------------------------------------------- tables

    @property
    def runs(self) -> int:
        return len(self.data.run_us)

    def _frame(self) -> Any:
        import pandas as pd

        d = self.data
        return pd.DataFrame(
            {
                "node_id": np.asarray(d.ev_node, dtype=np.int64),
                "run": np.asarray(d.ev_run, dtype=np.int64),
                "start_us": np.asarray(d.ev_start_us, dtype=np.float64),
                "dur_us": np.asarray(d.ev_dur_us, dtype=np.float64),
            }
        )

    def by_node(self) -> Any:
        """One row per node: node, op_type, provider, calls, median_us, mean_us, total_us,
        share (of all node time), input_shapes, output_shapes; slowest first."""
        import pandas as pd

        d = self.data
        ev = self._frame()
        g = ev.groupby("node_id")["dur_us"]
        stats = pd.DataFrame(
            {"calls": g.size(), "median_us": g.median(), "mean_us": g.mean(), "total_us": g.sum()}
        )
        table = pd.DataFrame(
            {
                "node": d.node,
                "op_type": d.op_type,
                "provider": d.provider,
                "input_shapes": d.input_shapes,
                "output_shapes": d.output_shapes,
            }
        ).join(stats, how="inner")
        total = float(table["total_us"].sum()) or 1.0
        table["share"] = table["total_us"] / total
        cols = ["node", "op_type", "provider", "calls", "median_us", "mean_us", "total_us",
                "share", "input_shapes", "output_shapes"]  # fmt: skip
        return table[cols].sort_values("total_us", ascending=False).reset_index(drop=True)

    def _grouped(self, keys: list[str]) -> Any:
        import pandas as pd

        nodes = self.by_node()
        ev = self._frame()
        ev = ev.join(
            pd.DataFrame({"op_type": self.data.op_type, "provider": self.data.provider}),
            on="node_id",
        )
        per_run = ev.groupby([*keys, "run"])["dur_us"].sum().groupby(level=keys).median()
        out = nodes.groupby(keys).agg(
            nodes=("node", "size"), calls=("calls", "sum"), total_us=("total_us", "sum")
        )
        out["median_per_run_us"] = per_run
        out["share"] = out["total_us"] / (float(out["total_us"].sum()) or 1.0)
        return out.sort_values("total_us", ascending=False).reset_index()

    def by_op_type(self) -> Any:
        """One row per (op_type, provider): nodes, calls, total_us, median_per_run_us, share."""
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
        ev = self._frame()
        ev = ev[ev["run"] == run].sort_values("start_us")
        d = self.data
        return pd.DataFrame(
            {
                "node": [d.node[i] for i in ev["node_id"]],
                "op_type": [d.op_type[i] for i in ev["node_id"]],
                "provider": [d.provider[i] for i in ev["node_id"]],
                "start_us": ev["start_us"].to_numpy(),
                "dur_us": ev["dur_us"].to_numpy(),
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
    from ortlab.engine import call, check_report, default_timeout, prepare

    if runs < 1 or warmup < 0:
        raise ValueError(f"runs must be >= 1 and warmup >= 0 (got runs={runs}, warmup={warmup})")
    m, cfg, f = prepare(model, config, feeds, dims)
    out = call(
        "profile",
        {
            "model_path": str(m.path),
            "model_name": m.name,
            "config": cfg,
            "feeds": dict(f),
            "runs": runs,
            "warmup": warmup,
        },
        desc=f"profile {m.name}",
        context=f"of {m.name!r} with {cfg.label()}",
        progress=progress,
        timeout=timeout if timeout is not None else default_timeout(),
    )
    check_report(out, cfg, m)
    notes = [
        "Times are measured with ORT's profiler on (about 5 µs of overhead per node): use them "
        "for shares and comparisons between nodes; ortlab.benchmark gives latency.",
        *f.notes,
    ]
    return ProfileResult(
        model=m.name, config=cfg.to_dict(), data=out["data"], report=out["report"], notes=notes
    )
