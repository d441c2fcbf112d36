"""Where would it run? Predicted placement on accelerators that are not here, with a reason
for every node that falls back.

Each target's prediction says what it rests on (``evidence``):

- ``compiled``: the EP's own partitioner ran here, compile-only (QNN's HTP backend with
  ``ep.context_enable=1``; OpenVINO when it lists a device); ORT's assignment API gives the
  split, QNN's verbose ``REASON :`` lines the cause per node;
- ``rules``: the NNAPI/CoreML usability checker shipped in the installed onnxruntime wheel
  (its op lists, fixed-shape and rank rules);
- ``measured``: a real session of that EP ran the model here;
- ``unknown``: nothing here can say (no device, EP not loadable): the reason says why;
- ``failed``: the EP's compile failed (ORT's Python wrapper then retries on CPU and says "EP
  Error … Falling back"): reported as a failure, never as a prediction.

The per-node join is :func:`ortlab.analysis.placement.measure.join_placement` on the graph that was
partitioned (QNN's EPContext dump, mapped back to the original nodes by tensor names), so
``w["qnn"]`` is a :class:`PlacementResult` the graph view colours; its rows say
``time_source="predicted: no time"``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ortlab.analysis.graph.mapping import OpNode
from ortlab.analysis.placement.measure import join_placement
from ortlab.analysis.placement.reasons import category, node_reason
from ortlab.analysis.placement.result import PlacementResult
from ortlab.analysis.placement.whatifresult import (
    CPU,
    DEFAULT_QNN_OPTIONS,
    DEFAULT_TARGETS,
    PREDICTED,
    TARGETS,
    TargetInfo,
    WhatIfResult,
    WhatIfRow,
    qnn_options_text,
)
from ortlab.core.config import LEVELS, SessionConfig
from ortlab.core.eps import canonical_provider
from ortlab.core.model import Model, ModelLike
from ortlab.core.run import Run
from ortlab.engine import tasks_whatif
from ortlab.engine.calls import Via, edge
from ortlab.engine.calls import run as run_task
from ortlab.engine.replies import TargetEvidence, WhatIfReply
from ortlab.engine.session import SessionReport
from ortlab.engine.trace import ProfileData
from ortlab.engine.verdicts import parse_qnn_log

if TYPE_CHECKING:
    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike

__all__ = ["unconfigured", "whatif", "whatif_run"]


def _empty_profile() -> ProfileData:
    return ProfileData(
        node=[],
        op_type=[],
        provider=[],
        input_types=[],
        output_types=[],
        ev_node=[],
        ev_run=[],
        ev_start_us=[],
        ev_dur_us=[],
        run_us=[],
    )


def _report(ep: str, raw: TargetEvidence, evidence: str, ort_version: str) -> SessionReport:
    return SessionReport(
        requested=[ep],
        active=list(raw.active or [ep, CPU]),
        missing=[],
        level="basic",
        create_ms=float(raw.seconds) * 1e3,
        ort_version=ort_version,
        notes=[f"predicted ({evidence}, not run)"],
    )


def _placement(
    *,
    m: Model,
    original: Sequence[OpNode],
    target: str,
    ep: str,
    evidence: str,
    raw: TargetEvidence,
    ort_version: str,
) -> PlacementResult:
    graph = m.proto.graph
    assignment = [(e, tuple(n for n, _ in nodes)) for e, nodes in raw.assignment or []]
    assigned = {n: e for e, names in assignment for n in names}
    final = [OpNode(a, b, c, tuple(d), tuple(e), f) for a, b, c, d, e, f in raw.final or []]
    if final and raw.verdicts is not None:  # the checker on ORT's level-1 graph
        verdicts = raw.verdicts
        placements = {n.name: CPU if verdicts.get(n.name, "x") else ep for n in final}
        source = f"rules ({raw.ops_file or ''}, on ORT's level-1 graph)"
    elif final:
        placements = {
            n.name: ep if n.op_type == "EPContext" else assigned.get(n.name, CPU) for n in final
        }
        source = "EPContext dump (compile only)"
    else:
        final = list(original)
        placements = {n.name: assigned.get(n.name, CPU) for n in final}
        source = "assignment API (by name)"
    joined = join_placement(
        model=m.name,
        config=SessionConfig((target, "cpu"), level="basic"),
        original=original,
        initializers=[t.name for t in graph.initializer],
        graph_inputs=[i.name for i in graph.input],
        graph_outputs=[o.name for o in graph.output],
        final=final,
        data=_empty_profile(),
        assignment=assignment,
        placements=placements,
        report=_report(ep, raw, evidence, ort_version),
        final_source=source,
    )
    measured = evidence == "measured"
    rows = [
        dataclasses.replace(
            r,
            us_per_run=0.0,
            group_us_per_run=0.0,
            share=0.0,
            time_source="placed by a session here: no time" if measured else PREDICTED,
        )
        for r in joined.node_rows
    ]
    note = (
        f"measured here: a real {ep} session ran it (placement from {source}); not profiled, "
        "no times."
        if measured
        else f"predicted ({evidence}, not run): {ep} is not on this machine; placement from "
        f"{source}. No times."
    )
    return dataclasses.replace(joined, node_rows=rows, runs=0, notes=[note])


def _rows(
    *,
    target: str,
    ep: str,
    evidence: str,
    raw: TargetEvidence,
    pl: PlacementResult | None,
    original: Sequence[OpNode],
    reason: str,
) -> list[WhatIfRow]:
    if pl is None:  # unknown or failed: no provider predicted
        cat = "compile failed" if evidence == "failed" else f"no prediction ({evidence})"
        return [
            WhatIfRow(n.name, n.op_type, target, "", -1, evidence, reason, cat) for n in original
        ]
    verdicts: dict[str, str] = dict(raw.verdicts or parse_qnn_log(raw.log or []))
    logged = bool(raw.log) or raw.verdicts is not None
    out = []
    for r in pl.node_rows:
        why = ""
        if r.partition < 0 or not r.provider or r.op_type == "Constant":
            why = "removed by ORT before partitioning (constant folded, fused or eliminated)"
            if r.op_type == "Constant":
                why = "removed by ORT before partitioning (a Constant becomes an initializer)"
            provider = ""
        elif r.provider == ep:
            provider = ep
        else:
            provider = r.provider
            why = node_reason(r.node, r.op_type, r.optimized, verdicts, ep, logged=logged)
        out.append(
            WhatIfRow(
                r.node, r.op_type, target, provider, r.partition, evidence, why, category(why)
            )
        )
    return out


def _level1(got: TargetEvidence, ep: str) -> int:
    if got.counts is not None:
        return int(got.counts["num_supported_nodes"])
    return sum(len(names) for e, names in got.assignment or [] if e == ep)


def _dynamic_inputs(m: Model) -> list[str]:
    init = {t.name for t in m.proto.graph.initializer}
    out = []
    for i in m.proto.graph.input:
        if i.name in init or not i.type.HasField("tensor_type"):
            continue
        dims = [
            d.dim_param or (str(d.dim_value) if d.dim_value > 0 else "?")
            for d in i.type.tensor_type.shape.dim
        ]
        if any(not d.isdigit() for d in dims):
            out.append(f"{i.name}[{','.join(dims)}]")
    return out


def _target_ep(target: str) -> tuple[str, str]:
    key = target.strip().lower()
    if key in TARGETS:
        return key, TARGETS[key]
    return key, canonical_provider(key)


def build_result(
    m: Model,
    raw: WhatIfReply,
    targets: Sequence[tuple[str, str]],
    *,
    feeds: str,
    dims: dict[str, int] | None,
    dynamic: list[str],
    before: dict[str, int] | None = None,
    fixed: bool = False,
    qnn_options: Mapping[str, object] | None = None,
    level: str = "basic",
) -> WhatIfResult:
    """Pure: the per-node rows and per-target placements from the worker's raw evidence."""
    original = m.nodes
    version = raw.ort_version
    infos, rows, placements = [], [], {}
    for target, ep in targets:
        got = raw.targets.get(target, TargetEvidence(unknown="not run"))
        seconds = float(got.total_seconds)
        pl = None
        if got.unknown:
            evidence, reason = "unknown", got.unknown
        elif got.error and not got.measured:
            accepted = sum(1 for v in parse_qnn_log(got.log or []).values() if not v)
            before_fail = (
                f"{ep.removesuffix('ExecutionProvider')}'s partitioner accepted "
                f"{accepted} nodes, then "
                if accepted
                else ""
            )
            evidence, reason = "failed", f"{before_fail}compile failed: {got.error}"
            if ep == "QNNExecutionProvider" and qnn_options is not None:
                reason += (
                    f" (QNN options: {qnn_options_text(qnn_options)}; name your chip "
                    "with qnn_options={'htp_arch': ..., 'soc_model': ...})"
                )
        else:
            evidence = (
                "rules"
                if got.verdicts is not None
                else ("measured" if got.measured else "compiled")
            )
            reason = got.error
            pl = _placement(
                m=m,
                original=original,
                target=target,
                ep=ep,
                evidence=evidence,
                raw=got,
                ort_version=version,
            )
        mine = _rows(
            target=target,
            ep=ep,
            evidence=evidence,
            raw=got,
            pl=pl,
            original=original,
            reason=reason,
        )
        rows.extend(mine)
        if pl is not None:  # the graph view's details show the same reason as the table
            why = {r.node: r.reason for r in mine}
            said = [dataclasses.replace(r, reason=why.get(r.node, "")) for r in pl.node_rows]
            pl = dataclasses.replace(pl, node_rows=said)
            placements[target] = pl
        if got.counts is not None:
            partitions = int(got.counts["num_partitions"])
        elif pl is not None:
            partitions = sum(1 for e, _ in got.assignment or [] if e == ep)
        else:
            partitions = 0
        shown = {
            "counts": got.counts,
            "ops_file": got.ops_file,
            "version": got.version,
            "caveats": got.caveats,
        }
        detail: dict[str, Any] = {k: v for k, v in shown.items() if v is not None}
        infos.append(
            TargetInfo(
                target=target,
                ep=ep,
                evidence=evidence,
                reason=reason,
                seconds=seconds,
                level1_on_target=_level1(got, ep) if pl is not None else -1,
                partitions=partitions,
                detail=detail,
            )
        )
    notes = [
        "Predictions are labelled by evidence: compiled (the EP's partitioner ran here, "
        "compile only), rules (the wheel's NNAPI/CoreML checker), measured (a session ran "
        "here), unknown, failed. None of them is a measurement of time."
    ]
    if qnn_options is not None and any(ep == "QNNExecutionProvider" for _, ep in targets):
        notes.append(
            f"QNN compiled for {qnn_options_text(qnn_options)}; pass qnn_options= "
            "to predict for another chip."
        )
    if dynamic and not fixed:
        notes.append(
            f"Dynamic input shapes ({'; '.join(dynamic)}): NPUs need fixed shapes — "
            "fix the shapes with dims= (or feeds= for unnamed dims)."
        )
    return WhatIfResult(
        model=m.name,
        targets=infos,
        rows=rows,
        placements=placements,
        feeds=feeds,
        dims=dims,
        dynamic=dynamic,
        before=before or {},
        fixed=fixed,
        notes=notes,
        level=level,
    )


def whatif(
    model: ModelLike,
    targets: Sequence[str] = DEFAULT_TARGETS,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    dims: Mapping[str, int] | None = None,
    qnn_options: Mapping[str, object] | None = None,
    progress: bool | Callable[[int, int], None] = True,
    timeout: float | None = None,
) -> WhatIfResult:
    """Where ``model`` would run on each target, and why each node that falls back does.

    ``targets``: ``qnn`` (QNN HTP compile-only, needs ``onnxruntime-qnn``), ``nnapi`` and
    ``coreml`` (the wheel's usability checker), ``openvino`` (the plugin, when it lists a
    device here), or any EP alias (a real session when that EP loads here, else unknown).
    ``dims``/``feeds`` fix the input shapes (on a cached copy; the model is never changed);
    on a dynamic model the result then also records the nodes on each target *before*
    fixing (``before``, ``summary()``). ``qnn_options``: QNN provider options such as
    ``htp_arch``, ``soc_model``, ``enable_htp_fp16_precision``, over ortlab's default chip
    (``DEFAULT_QNN_OPTIONS``: htp_arch=73, soc_model=60, a Snapdragon 8 Gen 2), which every
    result names; an option set to None leaves it to QNN's own default. ``config``: the
    settings the predicted sessions are built with — its optimization level and config
    entries (its providers are the targets'); without one, ORT's basic level, the graph ORT's
    partitioner is handed (the usability checkers read that graph whatever the level).
    """
    if isinstance(targets, str):
        targets = [t for t in targets.split(",") if t.strip()]
    at = edge(model, config, feeds, dims=dims, progress=progress, timeout=timeout)
    if config is None:
        at = unconfigured(at)
    return whatif_run(
        at, targets, fixed=dims is not None or feeds is not None, dims=dims, qnn_options=qnn_options
    )


def unconfigured(run: Run) -> Run:
    """``run`` under the settings a prediction takes when none are given: ORT's basic level,
    the graph its partitioner is handed (the usability checkers read that graph whatever the
    level), no config entries."""
    return run.with_(config=SessionConfig(level="basic"))


def whatif_run(
    run: Run,
    targets: Sequence[str],
    *,
    fixed: bool,
    dims: Mapping[str, int] | None = None,
    qnn_options: Mapping[str, object] | None = None,
) -> WhatIfResult:
    """:func:`whatif`'s body for a :class:`Run` resolved already: ``run``'s model predicted
    with its config's level and entries (its providers are the targets'); ``fixed``: at the
    shapes of ``run``'s inputs (``dims``: the dims they were made at, when given), else at
    the model's own."""
    if not targets:
        raise ValueError("targets is empty: name at least one of qnn, nnapi, coreml, openvino")
    pairs = list(dict.fromkeys(_target_ep(t) for t in targets))
    m, f, progress = run.model, run.inputs, run.progress
    level = run.config.level
    entries = {str(k): str(v) for k, v in run.config.config_entries}
    dynamic = _dynamic_inputs(m)
    shapes = {k: [int(x) for x in v.shape] for k, v in f.items()} if fixed else None
    merged = {**DEFAULT_QNN_OPTIONS, **dict(qnn_options or {})}
    qnn = {str(k): str(v) for k, v in merged.items() if v is not None and v != ""}
    via = Via(
        desc=f"whatif {m.name}",
        context=f"what-if of {m.name!r}",
        progress=progress,
        timeout=run.timeout,
    )

    def predict(with_shapes: dict[str, list[int]] | None) -> WhatIfReply:
        return run_task(
            tasks_whatif.whatif,
            via,
            model_path=str(m.path),
            targets=pairs,
            feeds=dict(f),
            qnn_options=qnn,
            shapes=with_shapes,
            level=LEVELS[level],
            entries=entries,
        )

    before: dict[str, int] = {}
    if fixed and dynamic:
        first = build_result(
            m,
            predict(None),
            pairs,
            feeds="the model's own shapes",
            dims=None,
            dynamic=dynamic,
            qnn_options=qnn,
        )
        before = {t.target: int(t.on_target) for t in first.summary().itertuples()}
    raw = predict(shapes)
    return build_result(
        m,
        raw,
        pairs,
        feeds=f.describe() if fixed else "the model's own shapes",
        dims=dict(dims) if dims else None,
        dynamic=dynamic,
        before=before,
        fixed=fixed,
        qnn_options=qnn,
        level=level,
    )
