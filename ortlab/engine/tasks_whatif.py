"""What-if work that runs in the worker: an accelerator's own partitioner, without the device.

- QNN (``onnxruntime-qnn``): a compile-only HTP session (``ep.context_enable=1``, a fresh
  context path) runs QNN's real partitioner and graph preparation on this machine; ORT's
  assignment API gives the split and the verbose log QNN's per-node ``REASON :`` lines.
- NNAPI / CoreML: ``onnxruntime.tools.mobile_helpers.usability_checker`` with the op lists
  shipped in the installed wheel (read at run time, never copied).
- OpenVINO and every other EP: a real session when the EP has a device here, else nothing to
  predict with (the caller says so).

The task replies with a typed record (``replies.WhatIfReply``, one ``TargetEvidence`` per
target); the parsing of logs and the per-node join live in :mod:`ortlab.analysis.placement.whatif`.
Everything that touches ORT's registries stays in this process.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ortlab.core import cache
from ortlab.core.errors import error_text
from ortlab.core.graph import graph_node_protos
from ortlab.core.inputs import FeedsLike
from ortlab.core.run import Progress
from ortlab.core.runtime import PluginEP
from ortlab.engine.capture import capture_output
from ortlab.engine.children import ChildFailed, run_child
from ortlab.engine.plugins import plugin_devices, registered
from ortlab.engine.replies import FinalNodes, TargetEvidence, WhatIfReply
from ortlab.engine.session import clean_ort_message

if TYPE_CHECKING:
    import onnx


__all__ = ["fixed_model", "whatif"]

_COMPILE_TIMEOUT_S = 600.0
_CHILD = Path(__file__).with_name("_compile_child.py")
_LOG_PREFIX = re.compile(r"^\S+ \S+ \[[EWIV]:onnxruntime:[^\]]*\] ?")


COREML_OPS_FILE = "coreml_supported_mlprogram_ops.md"
"""CoreML's ML Program op list (the format Apple recommends; NeuralNetwork is deprecated)."""


def fixed_model(model_path: str, shapes: Mapping[str, list[int]]) -> str:
    """A copy of the model with every graph input fixed to ``shapes``
    (``onnx_model_utils.make_input_shape_fixed``, which also resolves the dim_params it
    replaces), kept in ortlab's cache by content and shapes. The user's file is never touched."""
    import onnx
    from onnxruntime.tools.onnx_model_utils import make_input_shape_fixed

    st = Path(model_path).stat()
    key = hashlib.sha256(
        repr(
            (
                str(Path(model_path).resolve()),
                st.st_size,
                st.st_mtime_ns,
                sorted((k, list(v)) for k, v in shapes.items()),
            )
        ).encode()
    ).hexdigest()[:24]
    out = cache.subdir("fixed-shapes") / f"{key}.onnx"
    if out.exists():
        return str(out)
    model = onnx.load(model_path)
    initializers = {t.name for t in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in shapes and inp.name not in initializers:
            make_input_shape_fixed(model.graph, inp.name, list(shapes[inp.name]))
    big = model.ByteSize() > 1_800_000_000
    tmp = out.with_suffix(f".{time.monotonic_ns()}.tmp")
    onnx.save(model, str(tmp), save_as_external_data=big, location=f"{key}.data")
    tmp.replace(out)
    return str(out)


def _graph_tuples(path: Path) -> FinalNodes:
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return [
        (n.name, n.op_type, n.domain, tuple(n.inputs), tuple(n.outputs), n.parent)
        for n, _ in graph_node_protos(graph, subgraphs=True)
    ]


@dataclass(frozen=True)
class Built:
    """How each predicted session is built: ORT's GraphOptimizationLevel name and the
    session config entries (the what-if's config)."""

    level: str
    entries: dict[str, str]


def _compile(
    model_path: str,
    ep: str,
    module: str,
    options: Mapping[str, str],
    made: Built,
    *,
    max_devices: int = 99,
) -> TargetEvidence:
    """A compile-only session of a plugin EP in a fresh process (``_compile_child.py``):
    QNN's HTP backend keeps the first session's settings (htp_arch, soc_model) for the life of
    a process, so a compile in the worker would depend on what ran before it (measured: a
    model whose compile fails with the default settings compiles after one with
    soc_model=60). Returns the assignment, the per-node log lines and the graph that was
    partitioned (the EPContext dump, or ORT's level-1 graph when the EP took nothing)."""
    start = time.perf_counter()
    with cache.temp_dir("whatif-compile-") as folder:
        request, answer = folder / "request.json", folder / "answer.json"
        dump, basic = folder / "context.onnx", folder / "basic.onnx"
        request.write_text(
            json.dumps(
                {
                    "model_path": model_path,
                    "ep": ep,
                    "module": module,
                    "options": dict(options),
                    "context_path": str(dump),
                    "basic_path": str(basic),
                    "max_devices": max_devices,
                    "level": made.level,
                    "entries": made.entries,
                }
            )
        )
        try:
            answer_ = run_child(
                [sys.executable, str(_CHILD), str(request), str(answer)],
                answer,
                cwd=folder,
                timeout=_COMPILE_TIMEOUT_S,
                what="the compile",
            )
        except ChildFailed as err:
            return _died(str(err))
        error = clean_ort_message(_LOG_PREFIX.sub("", answer_["error"])) if answer_["error"] else ""
        graph = dump if dump.exists() else basic
        got = TargetEvidence(  # compile_only's answer: assignment, active, log, error, seconds
            assignment=answer_["assignment"],
            active=answer_["active"],
            log=answer_["log"],
            error=error,
            seconds=answer_["seconds"],
            final=_graph_tuples(graph) if graph.exists() and not error else None,
        )
    return dataclasses.replace(got, process_seconds=time.perf_counter() - start)


def _died(why: str) -> TargetEvidence:
    return TargetEvidence(assignment=[], active=[], log=[], error=why)


def _plugin(ep: str, install: str) -> tuple[PluginEP | None, str]:
    """The registered plugin for ``ep``, or why there is none."""
    plugin = next((p for p in registered() if p.name == ep), None)
    if plugin is None:
        return None, f"the plugin is not installed: {install}"
    if plugin.error:
        return None, f"the plugin did not register: {plugin.error}"
    return plugin, ""


def _qnn(model_path: str, options: Mapping[str, str], made: Built) -> TargetEvidence:
    ep = "QNNExecutionProvider"
    plugin, why = _plugin(
        ep, "pip install onnxruntime-qnn --no-deps (its dependency would replace your onnxruntime)"
    )
    if plugin is None:
        return TargetEvidence(unknown=f"QNN: {why}")
    if not plugin_devices(ep):
        return TargetEvidence(unknown="the QNN plugin lists no device here")
    out = _compile(model_path, ep, plugin.module, {"backend_type": "htp", **options}, made)
    return dataclasses.replace(out, version=plugin.version)


def _openvino(model_path: str, made: Built) -> TargetEvidence:
    ep = "OpenVINOExecutionProvider"
    plugin, why = _plugin(ep, "pip install onnxruntime-ep-openvino --no-deps")
    if plugin is None:
        return TargetEvidence(unknown=f"OpenVINO: {why}")
    if not plugin_devices(ep):
        return TargetEvidence(
            unknown=f"the OpenVINO plugin ({plugin.version}) lists no device on this "
            "machine (OpenVINO found no CPU, GPU or NPU it supports here): no prediction"
        )
    out = _compile(model_path, ep, plugin.module, {}, made, max_devices=1)
    return dataclasses.replace(out, version=plugin.version)


def _checker(model_path: str, target: str) -> TargetEvidence:
    """Per-node verdicts of ORT's mobile usability checker, with its own counts."""
    import onnx
    from onnxruntime.tools.onnx_model_utils import optimize_model

    start = time.perf_counter()
    with cache.temp_dir("whatif-rules-") as folder:
        # As ORT's analyze_model does: the checker sees the level-1 graph ORT partitions.
        basic = folder / "basic.onnx"
        optimize_model(Path(model_path), basic, use_external_initializers=True)
        model = onnx.shape_inference.infer_shapes(onnx.load(str(basic)), strict_mode=False)
    return dataclasses.replace(_check(model, target), seconds=time.perf_counter() - start)


def _check(model: onnx.ModelProto, target: str) -> TargetEvidence:
    """The checker on a shape-inferred ModelProto; per-node causes from its own rules."""
    from onnxruntime.tools.mobile_helpers import usability_checker as uc

    if target == "nnapi":
        info = uc.check_nnapi_partitions(model, require_fixed_input_sizes=True)
        ops_file, max_rank = Path(uc.__file__).parent / "nnapi_supported_ops.md", 999
    else:
        info = uc.check_coreml_partitions(model, True, COREML_OPS_FILE)
        ops_file, max_rank = Path(uc.__file__).parent / COREML_OPS_FILE, 5
    checker = uc._SupportedOpsChecker(str(ops_file))  # the wheel's own op list
    pairs = graph_node_protos(model.graph, subgraphs=True)
    value_info: dict[str, onnx.ValueInfoProto] = {}
    initializers: set[str] = set()
    _scan(model.graph, value_info, initializers)
    name_of = {id(proto): op.name for op, proto in pairs}
    groups = [[name_of.get(id(n), n.name) for n in group] for group in info.supported_groups]
    supported = {name for group in groups for name in group}
    verdicts: dict[str, str] = {}
    for op, proto in pairs:
        if op.name in supported:
            verdicts[op.name] = ""
            continue
        why = []
        if not checker.is_op_supported(proto):
            why.append(f"op not supported: {proto.domain or 'ai.onnx'}:{proto.op_type}")
        dynamic = [
            i
            for i in proto.input
            if i
            and i not in initializers
            and not (i in value_info and uc.is_fixed_size_tensor(value_info[i]))
        ]
        if dynamic:
            why.append(f"dynamic shape: input {dynamic[0]!r} has no fixed shape")
        ranks = [
            len(value_info[i].type.tensor_type.shape.dim)
            for i in proto.input
            if i in value_info and value_info[i].type.HasField("tensor_type")
        ]
        if any(r > max_rank for r in ranks):
            why.append(f"rank: an input has rank {max(ranks)} > {max_rank}")
        verdicts[op.name] = "; ".join(why) or "left out of the checker's partitions"
    return TargetEvidence(
        verdicts=verdicts,
        groups=groups,
        counts={
            "num_nodes": int(info.num_nodes),
            "num_supported_nodes": int(info.num_supported_nodes),
            "num_partitions": int(info.num_partitions),
            "nodes_unsupported_due_to_op": int(info.nodes_unsupported_due_to_op),
            "nodes_unsupported_due_to_dynamic_input": int(
                info.nodes_unsupported_due_to_dynamic_input
            ),
            "num_unsupported_nodes_due_to_rank": int(info.num_unsupported_nodes_due_to_rank),
        },
        ops_file=ops_file.name,
        caveats=list(info.supported_ops_checker.get_caveats()),
        final=[
            (op.name, op.op_type, op.domain, tuple(op.inputs), tuple(op.outputs), op.parent)
            for op, _ in pairs
        ],
    )


def _scan(
    graph: onnx.GraphProto, value_info: dict[str, onnx.ValueInfoProto], initializers: set[str]
) -> None:
    for v in [*graph.input, *graph.output, *graph.value_info]:
        value_info.setdefault(v.name, v)
    initializers.update(t.name for t in graph.initializer)
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                _scan(attr.g, value_info, initializers)


def _session_here(model_path: str, ep: str, feeds: FeedsLike, made: Built) -> TargetEvidence:
    """Any other EP: a real session and one run when it loads here, else why not."""
    import onnxruntime as ort

    from ortlab.engine.tasks import prepare_feeds

    if ep not in ort.get_available_providers():
        return TargetEvidence(unknown=f"{ep} is not in this onnxruntime build")
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, made.level)
    for key, value in made.entries.items():
        so.add_session_config_entry(key, value)
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    start = time.perf_counter()
    try:
        with capture_output() as cap:
            sess = ort.InferenceSession(model_path, so, providers=[ep, "CPUExecutionProvider"])
    except Exception as err:  # noqa: BLE001 - reported as the target's reason
        return TargetEvidence(unknown=f"{ep}: session failed: {clean_ort_message(str(err))}")
    if ep not in sess.get_providers():
        said = [ln.strip() for ln in cap.lines() if "[E:" in ln or "[W:" in ln or "EP Error" in ln]
        why = clean_ort_message(_LOG_PREFIX.sub("", said[0])) if said else "it did not load"
        return TargetEvidence(
            unknown=f"{ep} does not load here ({why}): ortlab cannot predict its "
            "partition without the device"
        )
    try:
        sess.run(None, prepare_feeds(feeds))
        error = ""
    except Exception as err:  # noqa: BLE001 - the split is still real; the run failure is said
        error = f"the run failed: {error_text(err)}"
    return TargetEvidence(
        assignment=[
            (str(sg.ep_name), [(str(n.name), str(n.op_type)) for n in sg.get_nodes()])
            for sg in sess.get_provider_graph_assignment_info()
        ],
        active=list(sess.get_providers()),
        log=[],
        final=None,
        error=error,
        measured=True,
        seconds=time.perf_counter() - start,
    )


def whatif(
    progress: Progress,
    *,
    model_path: str,
    targets: list[tuple[str, str]],
    shapes: Mapping[str, list[int]] | None = None,
    feeds: FeedsLike | None = None,
    qnn_options: Mapping[str, str] | None = None,
    level: str = "ORT_ENABLE_BASIC",
    entries: Mapping[str, str] | None = None,
) -> WhatIfReply:
    """Per (target alias, EP name): the raw evidence. With ``shapes``, on a fixed-shape copy;
    each session at ``level`` (ORT's GraphOptimizationLevel name) with config ``entries``."""
    import onnxruntime as ort

    path = fixed_model(model_path, shapes) if shapes else model_path
    evidence: dict[str, TargetEvidence] = {}
    made = Built(level, dict(entries or {}))
    for i, (target, ep) in enumerate(targets):
        start = time.perf_counter()
        try:
            if target == "qnn":
                got = _qnn(path, qnn_options or {}, made)
            elif target in ("nnapi", "coreml"):
                got = _checker(path, target)
            elif target == "openvino":
                got = _openvino(path, made)
            else:
                got = _session_here(path, ep, feeds or {}, made)
        except Exception as err:  # noqa: BLE001 - one target failing never hides the others
            got = TargetEvidence(unknown=f"{target}: {error_text(err)}")
        elapsed = time.perf_counter() - start
        seconds = elapsed if got.unknown else got.seconds  # no session: the time it took to say
        evidence[target] = dataclasses.replace(got, seconds=seconds, total_seconds=elapsed)
        progress(i + 1, len(targets))
    return WhatIfReply(path=path, targets=evidence, ort_version=str(ort.__version__))
