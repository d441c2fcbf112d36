"""A profile as a Chrome-trace JSON file that Perfetto (ui.perfetto.dev) and chrome://tracing open.

Layout: one process per execution provider (``process_name`` is the EP's label), one thread per
OS thread ORT ran its nodes on; an ``X`` slice per profiled node event, named after the
*original* node where ortlab knows it (``args.kernel`` is ORT's name, ``args.name_from`` says
where the name came from); ``C`` memory counters per EP over the last measured run (the
allocator's state after each node, as ORT recorded it); a ``runs`` process with one slice per
measured run; flow arrows (``s``/``f``) along tensors that cross EPs (into and out of the
Memcpy nodes ORT inserts), known only from a placement join. Runs sit on one timeline at the
times ORT recorded them, so the gaps between runs show.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ortlab.core.config import SessionConfig
from ortlab.core.eps import MEMCPY_OPS, label
from ortlab.core.runtime import PROFILER_OVERHEAD
from ortlab.engine.trace import ProfileData, types_text

if TYPE_CHECKING:
    from ortlab.core.model import ModelLike

__all__ = [
    "Naming",
    "TraceJoin",
    "flow_events",
    "node_names",
    "perfetto_trace",
    "write_perfetto",
]

RUNS_PID = 1
"""The ``runs`` process; the EPs follow from 2 in order of their first node."""
GAP_US = 10.0
"""Between runs when the trace recorded no run start times (a profile saved before them)."""


@dataclass(frozen=True)
class Naming:
    """A node's slice name and where it came from."""

    name: str
    source: str
    """'placement join', 'model (same name)', 'model (level disabled)' or 'kernel (…)'."""
    original: tuple[str, ...] = ()
    """Every original node the kernel computes (the join's ``fused_from``)."""


@dataclass(frozen=True)
class TraceJoin:
    """What a placement join tells a trace (``PlacementResult.trace_join``): per kernel of
    ORT's final graph, the original nodes it computes and the one it is named after; and
    the tensors crossing EPs (producer, consumer, tensor), drawn as flow arrows."""

    fused: dict[str, tuple[str, ...]]
    primary: dict[str, str]
    edges: list[tuple[str, str, str]]


def node_names(
    data: ProfileData,
    *,
    level: str = "",
    join: TraceJoin | None = None,
    model_nodes: Sequence[str] | None = None,
) -> list[Naming]:
    """Per node of ``data.node``: the original node's name where ortlab can know it — from a
    placement join of the same model and config (a fused kernel is named after the original
    node whose op it computes), from the model's own node names (ORT keeps a node's name when
    it keeps the node), or at level 'disabled' (ORT renames nothing) — else ORT's kernel name."""
    fused = join.fused if join is not None else {}
    primary = join.primary if join is not None else {}
    known = set(model_nodes) if model_nodes is not None else None
    out = []
    for kernel, op in zip(data.node, data.op_type, strict=True):
        if op in MEMCPY_OPS:
            out.append(Naming(kernel, "kernel (inserted by ORT: no original node)"))
        elif fused.get(kernel):
            originals = fused[kernel]
            name = primary.get(kernel) or originals[0]
            out.append(Naming(name, "placement join", originals))
        elif known is not None and kernel in known:
            out.append(Naming(kernel, "model (same name)", (kernel,)))
        elif known is None and join is None and level == "disabled":
            out.append(Naming(kernel, "model (level disabled: ORT keeps every name)", (kernel,)))
        else:
            why = (
                "not in the join"
                if join is not None
                else (
                    "not in the model"
                    if known is not None
                    else "a placement's to_perfetto gives original names"
                )
            )
            out.append(Naming(kernel, f"kernel ({why})"))
    return out


def _run_bases(data: ProfileData) -> np.ndarray:
    """Each measured run's start on the exported timeline, µs (the first at 0)."""
    runs = len(data.run_us)
    if runs and len(data.run_start_us) == runs:
        starts = np.asarray(data.run_start_us, dtype=np.float64)
        return np.asarray(starts - starts[0], dtype=np.float64)
    durations = np.asarray(data.run_us, dtype=np.float64) + GAP_US
    return np.concatenate(([0.0], np.cumsum(durations)[:-1])) if runs else np.zeros(1)


def _lanes(starts: np.ndarray, ends: np.ndarray, track: np.ndarray) -> np.ndarray:
    """Per event, a lane within its track such that slices in one lane either follow one
    another or nest (an If/Loop/Scan and its body); lane 0 unless ORT's times overlap."""
    lane = np.zeros(len(starts), dtype=np.int64)
    order = np.lexsort((-(ends - starts), starts, track))
    stacks: dict[tuple[int, int], list[float]] = defaultdict(list)
    for i in order.tolist():
        k = 0
        while True:
            stack = stacks[(int(track[i]), k)]
            while stack and stack[-1] <= starts[i]:
                stack.pop()
            if not stack or ends[i] <= stack[-1]:
                stack.append(float(ends[i]))
                lane[i] = k
                break
            k += 1
    return lane


def flow_events(
    data: ProfileData,
    edges: Sequence[tuple[str, str, str]],
    starts: np.ndarray,
    where: Sequence[tuple[int, int]],
) -> list[dict[str, object]]:
    """Flow arrows (``s`` at the producer's slice, ``f`` bound to the consumer's enclosing
    slice) for each ``(producer, consumer, tensor)`` edge between kernels of ``data.node``: in
    each run, every consumer event gets an arrow from the producer's latest event starting
    before it. ``starts`` and ``where`` (pid, tid) are per event, as exported. Pure."""
    index = {name: k for k, name in enumerate(data.node)}
    by_node: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, (k, r) in enumerate(zip(data.ev_node, data.ev_run, strict=True)):
        by_node[(k, r)].append(i)
    runs = sorted(set(data.ev_run))
    out: list[dict[str, object]] = []
    flow_id = 0
    for producer, consumer, tensor in edges:
        p, c = index.get(producer), index.get(consumer)
        if p is None or c is None:
            continue
        for r in runs:
            made = sorted(by_node.get((p, r), []), key=lambda i: starts[i])
            for ci in by_node.get((c, r), []):
                before = [i for i in made if starts[i] <= starts[ci]]
                if not before:
                    continue
                pi = before[-1]
                flow_id += 1
                common = {"name": tensor, "cat": "tensor", "id": flow_id}
                out.append(
                    {
                        **common,
                        "ph": "s",
                        "ts": float(starts[pi]),
                        "pid": where[pi][0],
                        "tid": where[pi][1],
                    }
                )
                out.append(
                    {
                        **common,
                        "ph": "f",
                        "bp": "e",
                        "ts": float(starts[ci]),
                        "pid": where[ci][0],
                        "tid": where[ci][1],
                    }
                )
    return out


def perfetto_trace(
    data: ProfileData,
    *,
    names: Sequence[Naming] | None = None,
    edges: Sequence[tuple[str, str, str]] = (),
    metadata: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The Chrome-trace document (pure: ``data`` and names in, a JSON-ready dict out)."""
    names = list(names) if names is not None else [Naming(k, "kernel") for k in data.node]
    n_ev = len(data.ev_node)
    ids = np.asarray(data.ev_node, dtype=np.int64)
    runs = np.asarray(data.ev_run, dtype=np.int64)
    dur = np.asarray(data.ev_dur_us, dtype=np.float64)
    bases = _run_bases(data)
    starts = bases[runs] + np.asarray(data.ev_start_us, dtype=np.float64) if n_ev else dur
    threads = data.threads if len(data.ev_thread) == n_ev and data.threads else ["?"]
    ev_thread = np.asarray(
        data.ev_thread if len(data.ev_thread) == n_ev else [0] * n_ev, dtype=np.int64
    )
    eps = list(dict.fromkeys(data.provider[k] for k in dict.fromkeys(data.ev_node)))
    ep_pid = {ep: RUNS_PID + 1 + i for i, ep in enumerate(eps)}
    node_pid = np.asarray([ep_pid.get(p, 0) for p in data.provider], dtype=np.int64)
    pid = node_pid[ids] if n_ev else ids
    track = pid * (len(threads) + 1) + ev_thread
    lane = _lanes(starts, starts + dur, track) if n_ev else ids
    tid = ev_thread + 1 + lane * (len(threads) + 1)
    meta: list[dict[str, object]] = [
        _meta("process_name", RUNS_PID, 0, name="runs"),
        _meta("process_sort_index", RUNS_PID, 0, sort_index=0),
        _meta("thread_name", RUNS_PID, 1, name="measured runs"),
    ]
    for ep, p in ep_pid.items():
        meta.append(_meta("process_name", p, 0, name=label(ep)))
        meta.append(_meta("process_sort_index", p, 0, sort_index=p))
    for p, t in sorted(set(zip(pid.tolist(), tid.tolist(), strict=True))):
        thread = threads[(t - 1) % (len(threads) + 1)]
        extra = (t - 1) // (len(threads) + 1)
        text = f"thread {thread}" + (f" (overlapping slices, {extra})" if extra else "")
        meta.append(_meta("thread_name", p, t, name=text))
    shapes = [
        (types_text(i), types_text(o))
        for i, o in zip(data.input_types, data.output_types, strict=True)
    ]
    slices = []
    for i, (k, r) in enumerate(zip(ids.tolist(), runs.tolist(), strict=True)):
        nm = names[k]
        args: dict[str, object] = {
            "kernel": data.node[k],
            "name_from": nm.source,
            "op_type": data.op_type[k],
            "provider": data.provider[k],
            "run": r,
            "input_shapes": shapes[k][0],
            "output_shapes": shapes[k][1],
        }
        if len(nm.original) > 1:
            args["original_nodes"] = list(nm.original)
        slices.append(
            {
                "ph": "X",
                "name": nm.name,
                "cat": "node",
                "ts": float(starts[i]),
                "dur": float(dur[i]),
                "pid": int(pid[i]),
                "tid": int(tid[i]),
                "args": args,
            }
        )
    marks = [
        {
            "ph": "X",
            "name": f"run {r}",
            "cat": "run",
            "ts": float(bases[r]),
            "dur": float(d),
            "pid": RUNS_PID,
            "tid": 1,
            "args": {"run": r, "run_us": d},
        }
        for r, d in enumerate(data.run_us)
    ]
    where = list(zip(pid.tolist(), tid.tolist(), strict=True))
    return {
        "traceEvents": [
            *meta,
            *marks,
            *slices,
            *_counters(data, starts, pid),
            *flow_events(data, edges, starts, where),
        ],
        "displayTimeUnit": "ms",
        "metadata": dict(metadata or {}),
    }


def _meta(what: str, pid: int, tid: int, **args: object) -> dict[str, object]:
    return {"ph": "M", "name": what, "pid": pid, "tid": tid, "args": args}


def _counters(data: ProfileData, starts: np.ndarray, pid: np.ndarray) -> list[dict[str, object]]:
    """The allocator per EP after each node of the last measured run (ORT records it per node
    event; the profile keeps each node's last): bytes in use, peak so far, held by the arena."""
    n = len(data.node)
    cols = {
        "in_use_bytes": data.in_use_bytes,
        "peak_bytes": data.peak_bytes,
        "arena_bytes": data.arena_bytes,
    }
    if not data.ev_run or any(len(v) != n for v in cols.values()):
        return []
    last = max(data.ev_run)
    latest: dict[int, int] = {}
    for i, (k, r) in enumerate(zip(data.ev_node, data.ev_run, strict=True)):
        if r == last and (k not in latest or starts[i] >= starts[latest[k]]):
            latest[k] = i
    out = []
    for k, i in sorted(latest.items(), key=lambda item: starts[item[1]]):
        values = {c: v[k] for c, v in cols.items() if v[k] >= 0}
        if values:
            out.append(
                {
                    "ph": "C",
                    "name": "memory",
                    "pid": int(pid[i]),
                    "ts": float(starts[i] + data.ev_dur_us[i]),
                    "args": values,
                }
            )
    return out


def write_perfetto(
    data: ProfileData,
    path: str | os.PathLike[str],
    *,
    model_name: str,
    config: SessionConfig,
    join: TraceJoin | None = None,
    model: ModelLike | None = None,
) -> Path:
    """Write ``data`` as a Perfetto/Chrome trace to ``path`` (atomically: a temporary file in
    the same folder, then renamed); refuses an ``.onnx`` path and the model's own file."""
    out = Path(path).expanduser().absolute()
    model_nodes = None
    if model is not None:
        from ortlab.core.model import load

        m = load(model)
        model_nodes = [n.name for n in m.nodes]
        if out.exists() and out.resolve() == Path(m.path).resolve():
            raise ValueError(f"Refusing to overwrite the model {out} with a trace.")
    if out.suffix.lower() == ".onnx":
        raise ValueError(f"Refusing to write a trace to {out}: an .onnx path is a model's.")
    if not out.parent.is_dir():
        raise FileNotFoundError(f"No folder {out.parent} to write the trace into.")
    names = node_names(data, level=config.level, join=join, model_nodes=model_nodes)
    edges = join.edges if join is not None else []
    how = sorted({n.source for n in names})
    doc = perfetto_trace(
        data,
        names=names,
        edges=edges,
        metadata={
            "model": model_name,
            "config": config.to_dict(),
            "runs": len(data.run_us),
            "names": how,
            "flows": "tensors crossing EPs, from the placement join"
            if join is not None
            else "none: write it from a placement (PlacementResult.to_perfetto) for them",
            "memory": "per EP, after each node of the last measured run, as ORT recorded it",
            "times": f"µs, profiling on ({PROFILER_OVERHEAD})",
        },
    )
    text = json.dumps(doc, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(text)
        Path(tmp).chmod(0o644)  # mkstemp's 0600 would hide the trace from a viewer run by others
        Path(tmp).replace(out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
