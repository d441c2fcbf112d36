"""Why each node is not on the EP the session wanted: ORT's own verdicts, joined per node.

tests/data/reasons/cuda-format_fallbacks.log is NOT a captured log: there is no GPU here. Its
lines follow the format strings in onnxruntime's source (cuda_execution_provider.cc
GetCapability, fallback_cpu_capability.cc, transformer_memcpy.cc), the way ORT prints them at
INFO/VERBOSE; the expected reasons below were written from those strings. The EP-did-not-load
case and the OpenVINO probe are real sessions.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import ortlab
from ortlab.analysis.graph.mapping import OpNode, graph_nodes
from ortlab.analysis.placement.measure import join_placement
from ortlab.analysis.placement.reasons import category, fix_for, parse_ort_fallbacks
from ortlab.core.config import SessionConfig
from ortlab.engine.session import ProviderIssue, SessionReport, why_lines
from ortlab.engine.trace import ProfileData

DATA = Path(__file__).parent / "data" / "reasons"
CUDA, CPU, OV = "CUDAExecutionProvider", "CPUExecutionProvider", "OpenVINOExecutionProvider"


def _log() -> list[str]:
    return why_lines((DATA / "cuda-format_fallbacks.log").read_text().splitlines())


def test_only_verdict_lines_are_kept() -> None:
    kept = _log()
    assert len(kept) == 4, kept  # not the session options, the candidate line, Memcpy, placements
    assert not any(line.startswith("2026") for line in kept), "timestamps and prefix removed"


def test_ort_fallback_lines_parse_to_reasons() -> None:
    got = parse_ort_fallbacks(_log())
    assert set(got) == {"gs", "MulAdd_fused", "shape", "up"}
    assert category(got["gs"]) == "op not supported: GridSample"
    assert got["gs"].startswith("no CUDA kernel for GridSample")
    assert category(got["MulAdd_fused"]) == "op not supported: FusedMulAdd"
    assert category(got["up"]) == "op not supported: Resize"
    assert "does not support this node" in got["up"]
    assert category(got["shape"]) == "shape computation kept on CPU"
    assert "newer onnxruntime" in fix_for("op not supported: GridSample", CUDA, [], fixed=False)


def _cuda_like() -> tuple[onnx.ModelProto, list[OpNode], dict[str, str]]:
    """A model and the final graph ORT would make of it on CUDA + CPU (Memcpy included)."""
    f = TensorProto.FLOAT
    g = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "W"], ["a"], name="conv"),
            helper.make_node("Shape", ["a"], ["s"], name="shape"),
            helper.make_node("GridSample", ["a", "grid"], ["b"], name="gs"),
            helper.make_node("Resize", ["b", "", "scales"], ["u"], name="up"),
            helper.make_node("Mul", ["u", "c1"], ["m"], name="mul"),
            helper.make_node("Add", ["m", "c2"], ["z"], name="add"),
            helper.make_node("Relu", ["z"], ["y"], name="relu"),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", f, [1, 1, 4, 4]),
            helper.make_tensor_value_info("grid", f, [1, 4, 4, 2]),
        ],
        [helper.make_tensor_value_info("y", f, None), helper.make_tensor_value_info("s", 7, None)],
        initializer=[
            helper.make_tensor("W", f, [1, 1, 1, 1], [1.0]),
            helper.make_tensor("scales", f, [4], [1, 1, 2, 2]),
            helper.make_tensor("c1", f, [], [2.0]),
            helper.make_tensor("c2", f, [], [1.0]),
        ],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    final = [
        OpNode("conv", "Conv", "", ("x", "W"), ("a",)),
        OpNode("Memcpy_1", "MemcpyToHost", "", ("a",), ("a_h",)),
        OpNode("shape", "Shape", "", ("a_h",), ("s",)),
        OpNode("gs", "GridSample", "", ("a_h", "grid"), ("b",)),
        OpNode("up", "Resize", "", ("b", "", "scales"), ("u",)),
        OpNode("MulAdd_fused", "FusedMulAdd", "com.microsoft", ("u", "c1", "c2"), ("z",)),
        OpNode("Memcpy_2", "MemcpyFromHost", "", ("z",), ("z_d",)),
        OpNode("relu", "Relu", "", ("z_d",), ("y",)),
    ]
    on = {"conv": CUDA, "Memcpy_1": CUDA, "Memcpy_2": CUDA, "relu": CUDA}
    return model, final, {n.name: on.get(n.name, CPU) for n in final}


def _join(report: SessionReport) -> ortlab.PlacementResult:
    model, final, placements = _cuda_like()
    if CUDA not in report.active:  # no CUDA: ORT places everything on the CPU, no copies
        final = [n for n in final if not n.op_type.startswith("Memcpy")]
        plain = {"a_h": "a", "z_d": "z"}
        final = [
            dataclasses.replace(n, inputs=tuple(plain.get(t, t) for t in n.inputs)) for n in final
        ]
        placements = dict.fromkeys(placements, CPU)
    g = model.graph
    columns = [f.name for f in dataclasses.fields(ProfileData) if str(f.type).startswith("list[")]
    empty = ProfileData(**{c: [] for c in columns})  # no node event: nothing was profiled
    return join_placement(
        model="cuda_like",
        config=SessionConfig(),
        original=graph_nodes(g),
        initializers=[t.name for t in g.initializer],
        graph_inputs=[i.name for i in g.input],
        graph_outputs=[o.name for o in g.output],
        final=final,
        data=empty,
        assignment=[],
        placements=placements,
        report=report,
        final_source="optimized model",
    )


def _report(**kw: object) -> SessionReport:
    base: dict[str, object] = {
        "requested": [CUDA, CPU],
        "active": [CUDA, CPU],
        "missing": [],
        "level": "all",
        "create_ms": 0.0,
        "ort_version": "1.31.1",
    }
    return SessionReport(**{**base, **kw})  # type: ignore[arg-type]


def test_each_node_gets_its_own_reason_from_the_log() -> None:
    pl = _join(_report(why_log=_log()))
    assert pl.wanted == CUDA
    why = dict(zip(pl.nodes["node"], pl.nodes["reason"], strict=True))
    assert why["conv"] == "" and why["relu"] == "", "on the wanted EP: no reason"
    assert why["gs"].startswith("no CUDA kernel for GridSample")
    assert category(why["shape"]) == "shape computation kept on CPU"
    assert category(why["up"]) == "op not supported: Resize"
    for name in ("mul", "add"):  # ORT fused them; the log names the fused node
        assert why[name].startswith("fused by ORT into MulAdd_fused"), why[name]
    groups = pl.reasons().set_index("reason")
    assert groups.loc["op not supported: FusedMulAdd", "nodes"] == 2
    assert groups["nodes"].sum() == sum(1 for r in why.values() if r)
    copies = pl.memcpy.set_index("node")["reason"]
    crossing = "(the tensor crosses EPs)"
    assert copies["Memcpy_1"] == f"inserted by ORT: copies a from CUDA to CPU {crossing}"
    assert copies["Memcpy_2"].startswith("inserted by ORT: copies z from CPU to CUDA")


def test_without_a_verdict_the_reason_says_so() -> None:
    why = _join(_report()).nodes.set_index("node")["reason"]
    assert why["gs"].startswith("not claimed by CUDA: no reason in ORT's log")
    assert why["conv"] == ""


def test_an_ep_that_did_not_load_is_every_nodes_reason() -> None:
    issue = ProviderIssue(CUDA, "Failed to load libonnxruntime_providers_cuda.so")
    pl = _join(_report(active=[CPU], missing=[issue], why_log=_log()))
    reasons = pl.nodes["reason"]
    assert (reasons == "CUDA did not load: Failed to load libonnxruntime_providers_cuda.so").all()
    assert pl.reasons()["reason"].tolist() == ["EP did not load"]


def test_cpu_only_sessions_have_no_reasons() -> None:
    pl = _join(_report(requested=[CPU], active=[CPU]))
    assert pl.wanted == "" and set(pl.nodes["reason"]) == {""} and pl.reasons().empty


def test_real_session_cuda_missing_here() -> None:
    """A real session (no GPU here): the reason is the report's own load error, verbatim."""
    m = ortlab.examples.load("nan_guard_cnn")
    with pytest.warns(ortlab.ProviderFallbackWarning):
        pl = ortlab.placement(
            m, ortlab.SessionConfig(providers=["cuda", "cpu"]), runs=1, progress=False
        )
    if CUDA in pl.report.active:
        pytest.skip("CUDA loaded on this machine")
    said = pl.report.to_pandas().set_index("provider").loc[CUDA, "reason"]
    placed = pl.nodes[pl.nodes["partition"] >= 0]
    assert (placed["reason"] == f"CUDA did not load: {said}").all()
    assert pl.reasons().loc[0, "nodes"] == len(placed)


@pytest.mark.openvino
def test_openvino_says_nothing_so_ortlab_asks_it() -> None:
    """OpenVINO logs no per-node verdict; the probe's answer is checked against a one-node
    session built here, independently of ortlab."""
    import onnxruntime as ort

    m = ortlab.examples.load("nan_guard_cnn")
    pl = ortlab.placement(
        m, ortlab.SessionConfig(providers=["openvino", "cpu"]), runs=1, progress=False
    )
    why = pl.nodes.set_index("node")
    assert category(why.loc["/sanitize/IsNaN", "reason"]) == "op not supported: IsNaN"
    assert (why.loc[why["provider"] == OV, "reason"] == "").all()
    node = helper.make_node("IsNaN", ["x"], ["y"], name="alone")
    one = helper.make_model(
        helper.make_graph(
            [node],
            "g",
            [helper.make_tensor_value_info("x", 1, [1, 16, 32, 32])],
            [helper.make_tensor_value_info("y", 9, [1, 16, 32, 32])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=8,
    )
    so = ort.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    sess = ort.InferenceSession(one.SerializeToString(), so, providers=[OV, CPU])
    assert OV not in {sg.ep_name for sg in sess.get_provider_graph_assignment_info()}
