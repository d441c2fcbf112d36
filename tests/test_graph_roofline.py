"""The graph coloured by the roofline: each original node shows its kernel's achieved_fraction
(the one number of ``ortlab.roofline``), through the placement join or by name."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import ortlab
from ortlab.analysis.graph.data import graph_data
from ortlab.analysis.graph.roof import roof_marks
from ortlab.analysis.limits.roofline import RoofRow
from ortlab.core.errors import OrtlabWarning
from ortlab.views.graph.widget import GraphView, default_color
from tests import models
from tests.graphwire import page_state


def _silu_with_shape() -> onnx.ModelProto:
    """silu_cnn with its input's Shape as an output: at level 'all' ORT folds it into a
    constant, so no kernel computes it."""
    proto = models.silu_cnn()
    proto.graph.node.append(helper.make_node("Shape", ["x"], ["x_shape"], "/input/Shape"))
    proto.graph.output.append(helper.make_tensor_value_info("x_shape", TensorProto.INT64, [4]))
    return proto


@pytest.fixture(scope="module")
def at_disabled() -> tuple[ortlab.Model, ortlab.RooflineResult]:
    m = ortlab.load(models.silu_cnn())
    return m, ortlab.roofline(m, {"level": "disabled"}, runs=3, warmup=1, progress=False)


@pytest.fixture(scope="module")
def at_all() -> tuple[ortlab.Model, ortlab.RooflineResult, ortlab.PlacementResult]:
    m = ortlab.load(_silu_with_shape())
    cfg = {"level": "all"}
    roof = ortlab.roofline(m, cfg, runs=3, warmup=1, progress=False)
    return m, roof, ortlab.placement(m, cfg, runs=3, progress=False)


def test_at_level_disabled_each_node_shows_its_own_rows_fraction(
    at_disabled: tuple[ortlab.Model, ortlab.RooflineResult], tmp_path: Path
) -> None:
    m, roof = at_disabled
    rows = {r.node: r for r in roof.rows}
    g = graph_data(m, roofline=roof)
    assert len(g.nodes) == 15 and {n.name for n in g.nodes} == set(rows)
    for n in g.nodes:  # the one number: exactly RoofRow.achieved_fraction
        assert n.achieved_fraction == rows[n.name].achieved_fraction
        assert n.roof_bound == rows[n.name].bound and n.roof_ceiling.endswith("/s")
    assert g.has_roofline and g.has_time, "the roofline's own profile gives the times"
    assert any(note.startswith("15 of 15 nodes show the roofline") for note in g.notes)
    w = ortlab.graph(m, roofline=roof)
    assert w.color_by == "roofline", "a roofline and no diff: coloured by it"
    assert default_color(dataclasses.replace(g, has_diff=True)) == "diff"
    packed = w.data["nodes"]["achieved_fraction"]
    assert packed == [n.achieved_fraction for n in g.nodes]
    assert w.data["has_roofline"] is True
    page = page_state(w.to_html(tmp_path / "roof.html").read_text(encoding="utf-8"))
    assert page["color_by"] == "roofline"
    assert page["data"]["nodes"]["achieved_fraction"] == pytest.approx(packed, rel=1e-12)


def test_at_level_all_fused_nodes_show_their_kernels_fraction_through_the_placement(
    at_all: tuple[ortlab.Model, ortlab.RooflineResult, ortlab.PlacementResult],
) -> None:
    m, roof, pl = at_all
    rows = {r.node: r for r in roof.rows}
    g = graph_data(m, placement=pl, roofline=roof)
    by = {n.name: n for n in g.nodes}
    sig, mul = by["/model.1/act/Sigmoid"], by["/model.1/act/Mul"]
    assert sig.optimized == mul.optimized and sig.optimized[0] not in by, "fused: one kernel"
    checked = 0
    for n in g.nodes:
        kernels = [rows[k] for k in n.optimized if k in rows]
        if len(kernels) == 1:
            assert n.achieved_fraction == kernels[0].achieved_fraction
            assert n.roof_bound == kernels[0].bound
            checked += 1
    assert checked == 15, "every computing node is in one kernel of the roofline"
    shape = by["/input/Shape"]
    assert shape.optimized == [] and shape.achieved_fraction is None, "no kernel: no data"
    assert shape.roof_bound == "" and shape.roof_ceiling == ""
    assert sum(n.achieved_fraction is not None for n in g.nodes) == 15
    assert any(note.startswith("15 of 16 nodes show the roofline") for note in g.notes)
    assert ortlab.graph(m, placement=pl, roofline=roof).color_by == "roofline"


def test_without_a_placement_fused_kernels_map_to_nothing(
    at_all: tuple[ortlab.Model, ortlab.RooflineResult, ortlab.PlacementResult],
) -> None:
    m, roof, _ = at_all
    with pytest.warns(OrtlabWarning, match="not nodes of this model"):
        g = graph_data(m, roofline=roof)
    assert all(n.achieved_fraction is None for n in g.nodes), "never a wrong value"
    assert not g.has_roofline
    assert any("Pass placement=ortlab.placement" in note for note in g.notes)


def _row(node: str, us: float, fraction: float, bound: str = "compute") -> RoofRow:
    """A row whose counts give ``fraction`` of its bound in ``us`` (the row derives it): a
    compute-bound node's FLOPs, a memory-bound node's bytes (intensity under the ridge), or
    nothing to bound (``bound=''``)."""
    peak, bandwidth, seconds = 1e11, 1e10, us / 1e6
    if bound == "compute":  # 1 byte moved: far right of the ridge
        flops, moved = fraction * peak * seconds, 1.0
    elif bound == "memory":  # 0.1 FLOP a byte: left of the ridge (10 FLOP/byte)
        moved = fraction * bandwidth * seconds
        flops = 0.1 * moved
    else:
        flops, moved = math.nan, 0.0
    row = RoofRow(
        node,
        "Conv",
        "CPUExecutionProvider",
        us,
        0.1,
        flops,
        moved,
        "fp32",
        "compute",
        peak,
        bandwidth,
    )
    assert row.bound == bound and (
        math.isnan(fraction) or row.achieved_fraction == pytest.approx(fraction)
    )
    return row


def test_a_node_in_several_kernels_shows_their_time_weighted_mean() -> None:
    roof = type(
        "Roof",
        (),
        {
            "rows": [
                _row("k1", 30.0, 0.2),
                _row("k2", 10.0, 0.6, "memory"),
                _row("k3", 50.0, math.nan, ""),
            ]
        },
    )()
    placement = type(
        "Pl",
        (),
        {
            "node_rows": [
                type("Row", (), {"node": "a", "optimized": ("k1", "k2")})(),
                type("Row", (), {"node": "b", "optimized": ("k3",)})(),
                type("Row", (), {"node": "c", "optimized": ("k2",)})(),
            ]
        },
    )()
    marks, notes = roof_marks(roof, placement, ["a", "b", "c"])
    assert marks["a"].fraction == pytest.approx((0.2 * 30 + 0.6 * 10) / 40)
    assert marks["a"].bound == "compute" and marks["a"].ceiling == "" and marks["a"].kernels == 2
    assert "b" not in marks, "a kernel with nothing to bound (NaN) gives no fraction"
    # k2 is memory-bound at 0.1 FLOP a byte: its ceiling is 0.1 x 10 GB/s, not the GEMM's
    assert marks["c"].fraction == pytest.approx(0.6) and marks["c"].ceiling == "1 GFLOP/s"
    assert notes[0].startswith("2 of 3 nodes")


def test_the_roofline_mode_validates_in_the_widget() -> None:
    import traitlets

    w = ortlab.graph(ortlab.load(models.add()))
    assert w.color_by == "provider"
    w.color_by = "roofline"  # valid without data: the legend then says how to get it
    assert w.color_by == "roofline"
    with pytest.raises(traitlets.TraitError, match="roofline"):
        w.color_by = "roof"
    assert GraphView(graph_data(ortlab.load(models.add()))).color_by == "provider"
