"""Placement: the stored OpenVINO fixture replayed here, real CPU runs, and (marked openvino)
the real OpenVINO EP in its own venv."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

import ortlab
from ortlab.analysis.graph.mapping import OpNode, graph_nodes
from ortlab.analysis.placement.measure import join_placement
from ortlab.analysis.placement.result import PlacementResult
from ortlab.analysis.profiling import parse_profile_file
from ortlab.core.config import SessionConfig
from ortlab.engine.session import SessionReport

FIXTURES = Path(__file__).parent / "data" / "placement"
OV = "ov-1.24.1_nan_guard_cnn"
OV_EP = "OpenVINOExecutionProvider"
CPU_EP = "CPUExecutionProvider"


def _replay(probes: dict[str, str] | None = None) -> PlacementResult:
    fx = json.loads((FIXTURES / f"{OV}.json").read_text())
    m = ortlab.examples.load("nan_guard_cnn")
    g = m.proto.graph
    report = SessionReport(
        requested=[OV_EP, CPU_EP],
        active=fx["active"],
        missing=[],
        level="all",
        create_ms=0.0,
        ort_version=fx["onnxruntime"],
    )
    return join_placement(
        model=m.name,
        config=SessionConfig(),
        original=graph_nodes(g),
        initializers=[t.name for t in g.initializer],
        graph_inputs=[i.name for i in g.input],
        graph_outputs=[o.name for o in g.output],
        final=[OpNode(a, b, c, tuple(d), tuple(e)) for a, b, c, d, e in fx["final"]],
        data=parse_profile_file(FIXTURES / f"{OV}_profile.json", skip_runs=fx["warmup"]),
        assignment=[(ep, tuple(n[0] for n in nodes)) for ep, nodes in fx["assignment"]],
        placements=fx["placements"],
        report=report,
        final_source=fx["final_source"],
        probes=probes,
    )


def _check_openvino_split(pl: PlacementResult) -> None:
    parts = pl.partitions
    assert parts["provider"].tolist() == [OV_EP, CPU_EP, OV_EP]
    assert parts["compiled"].tolist() == [True, False, True]
    nodes = pl.nodes.set_index("node")
    assert nodes.loc["/sanitize/IsNaN", "provider"] == CPU_EP
    assert nodes.loc["/sanitize/IsNaN", "status"] == "kept"
    for name in ("/features/0/Conv", "/features/1/Relu"):
        assert nodes.loc[name, "provider"] == OV_EP and nodes.loc[name, "status"] == "compiled"
    assert set(parts.loc[0, "original_nodes"]) == {"/features/0/Conv", "/features/1/Relu"}
    assert "/classifier/Gemm" in parts.loc[2, "original_nodes"]
    assert parts.loc[0, "inputs"] == ["input"] and parts.loc[2, "outputs"] == ["logits"]
    b = pl.boundaries
    assert len(b) == 2  # OpenVINO -> IsNaN on CPU -> OpenVINO (the OV -> OV edge is no boundary)
    assert set(b["tensor"]) == {"/features/1/Relu_output_0", "/sanitize/IsNaN_output_0"}
    sizes = dict(zip(b["tensor"], b["bytes"], strict=False))
    assert sizes["/features/1/Relu_output_0"] == 16 * 32 * 32 * 4  # float [1,16,32,32]
    assert sizes["/sanitize/IsNaN_output_0"] == 16 * 32 * 32  # bool
    # the compiled subgraph's measured time is attributed to its member nodes
    for _, p in parts.iterrows():
        members = nodes.loc[p["original_nodes"]]
        assert members["us_per_run"].sum() == pytest.approx(p["us_per_run"])
    s = pl.summary().set_index("provider")
    assert s.loc[OV_EP, "partitions"] == 2 and s.loc[CPU_EP, "nodes"] == 1
    assert s["time_share"].sum() == pytest.approx(1.0)
    assert len(pl.memcpy) == 0


def test_openvino_fixture_replayed_in_main_venv() -> None:
    pl = _replay()
    _check_openvino_split(pl)
    assert pl.final_source == "EPContext dump"
    text = pl.to_text()
    assert "OpenVINOExecutionProvider (compiled)" in text and "EP boundaries (2)" in text
    assert "<table" in pl._repr_html_()


def test_placement_json_round_trip() -> None:
    pl = _replay()
    again = PlacementResult.from_json(pl.to_json())
    assert again == pl
    assert again.nodes.equals(pl.nodes)


@pytest.mark.openvino
def test_real_openvino_partition() -> None:
    import onnxruntime as ort

    if OV_EP not in ort.get_available_providers():
        pytest.fail("the openvino tests must run in the .venv-openvino environment")
    m = ortlab.examples.load("nan_guard_cnn")
    pl = ortlab.placement(
        m, ortlab.SessionConfig(providers=["openvino", "cpu"]), runs=3, progress=False
    )
    assert pl.report.active == [OV_EP, CPU_EP]
    _check_openvino_split(pl)
    assert set(pl.report.placements.values()) == {OV_EP, CPU_EP}, "verbose log was parsed"
    assert [ep for ep, _ in pl.assignment].count(OV_EP) == 2


def test_cpu_placement_resnet_like(mlp: ortlab.Model) -> None:
    pl = ortlab.placement(mlp, runs=3, progress=False)
    assert pl.final_source == "optimized model"
    assert set(pl.nodes["provider"]) == {CPU_EP}
    assert len(pl.partition_rows) == 1 and pl.boundary_rows == []
    assert set(pl.nodes["node"]) == {n.name for n in graph_nodes(mlp.proto.graph)}
    assert (pl.nodes["status"] == "fused").all(), "MatMul+Add+Relu fuse at level all"
    assert pl.nodes["us_per_run"].sum() == pytest.approx(pl.optimized["us_per_run"].sum())


def test_silent_fallback_is_part_of_the_result(mlp: ortlab.Model) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ortlab.ProviderFallbackWarning)
        pl = ortlab.placement(mlp, {"providers": ["cuda", "cpu"]}, runs=2, progress=False)
    assert pl.report.missing[0].provider == "CUDAExecutionProvider"
    assert "did not load: cuda" in repr(pl)
    assert set(pl.nodes["provider"]) == {CPU_EP}


def test_in_process_placement_leaves_no_files(mlp: ortlab.Model, in_tmp_cwd: Path) -> None:
    ortlab.placement(mlp, runs=1, progress=False)
    assert list(in_tmp_cwd.iterdir()) == []
