"""The doctor's roofline rule, on facts built by hand (as every rule is tested): near the limits
it says settings have nothing left to gain; far under the bound it names the fix that applies
(layout, fusion, threads, int8) with that fix's measured gain; in between, and without a
roofline, it stays quiet. And the real doctor carries the roofline it measured."""

from __future__ import annotations

from typing import Any

import pytest

import ortlab
from ortlab.analysis.limits.roofline import Peak, RooflineResult, RoofRow
from ortlab.core.config import SessionConfig
from ortlab.diagnosis.facts import Kind, candidate_key
from ortlab.diagnosis.rules_physics import machine_limits
from tests.test_doctor import _facts, _m

PEAKS = [
    Peak("fp32 GEMM", "fp32", 100e9, 90e9, 10),
    Peak("fp32 stream (Add)", "memory", 20e9, 18e9, 10),
]


def _row(node: str, op: str, share: float, fraction: float, *, us: float = 500.0) -> RoofRow:
    """A compute-bound row at ``fraction`` of the 100 GFLOP/s ceiling: its FLOPs are what
    that fraction does in ``us`` (the row derives its fraction from them)."""
    flops = fraction * 100e9 * us / 1e6
    row = RoofRow(
        node, op, "CPUExecutionProvider", us, share, flops, 1e3, "fp32", "compute", 100e9, 20e9
    )
    assert row.bound == "compute" and row.achieved_fraction == pytest.approx(fraction)
    return row


def _roof(rows: list[RoofRow]) -> RooflineResult:
    return RooflineResult(model="m", config=SessionConfig(), peaks=PEAKS, rows=rows, runs=5)


def test_near_the_limits_says_settings_have_nothing_left() -> None:
    roof = _roof([_row("conv1", "Conv", 0.7, 0.8), _row("conv2", "Conv", 0.3, 0.3)])
    (f,) = machine_limits(_facts(roofline=roof))
    assert f.rule == "machine_limits" and f.severity == "info"
    assert f.title == "Near this machine's limits: 70% of node time runs at half its bound or more"
    assert "100 GFLOP/s" in f.evidence and "20.0 GB/s" in f.evidence and f.nodes[0] == "conv1"


def test_far_under_with_plain_convs_below_level_all_is_layout() -> None:
    roof = _roof([_row("conv1", "Conv", 0.6, 0.05), _row("conv2", "Conv", 0.4, 0.4)])
    level = _m(candidate_key(Kind.LEVEL, "all"), 0.5, 0.45, 0.55, p50=5.0)
    (f,) = machine_limits(
        _facts(roofline=roof, requested=SessionConfig(level="basic"), measured={level.key: level})
    )
    assert f.rule == "far_from_bound" and f.fix.startswith("layout")
    assert f.title.startswith("60% of node time is in nodes under a tenth")
    assert f.ratio == 0.5 and f.gain == f"verdict of {level.key}" and f.saved_ms == 5.0
    assert f.nodes == ["conv1"]


def test_far_under_tiny_nodes_is_fusion_and_threads_and_int8_otherwise() -> None:
    tiny = _roof(
        [_row(f"add{i}", "Add", 0.1, 0.02, us=5.0) for i in range(6)]
        + [_row("mm", "MatMul", 0.4, 0.6)]
    )
    (f,) = machine_limits(_facts(roofline=tiny))
    assert f.fix.startswith("fusion") and f.gain == "not measured: the level is already 'all'"
    slow = _roof([_row("mm", "MatMul", 0.8, 0.05), _row("mm2", "MatMul", 0.2, 0.6)])
    (g,) = machine_limits(_facts(roofline=slow, requested=SessionConfig(intra_op_threads=1)))
    assert g.fix.startswith("threads") and "intra_op_threads=2" in g.code
    q = _m(candidate_key(Kind.VARIANT, "quant-dynamic"), 0.6, 0.5, 0.7, variant="m [int8]")
    (h,) = machine_limits(_facts(roofline=slow, measured={q.key: q}))
    assert h.fix.startswith("int8") and h.ratio == 0.6


@pytest.mark.parametrize("roof", [None, _roof([]), _roof([_row("c", "Conv", 1.0, 0.3)])])
def test_quiet_without_a_roofline_or_in_between(roof: Any) -> None:
    assert machine_limits(_facts(roofline=roof)) == []


@pytest.mark.slow
def test_the_doctor_measures_the_roofline_of_its_baseline() -> None:
    """The doctor's roofline is of the baseline it profiled (the same runs), and its finding
    is the rule's verdict on that roofline."""
    d = ortlab.doctor(ortlab.examples.path("resnet50"), budget_s=20, quantize=False, progress=False)
    assert d.roofline is not None and d.roofline.profile == d.profile
    assert {r.node for r in d.roofline.rows} == set(d.profile.by_node()["node"])
    said = [f for f in d.findings if f.rule in ("machine_limits", "far_from_bound")]
    expected = machine_limits(_facts(roofline=d.roofline, requested=d.requested))
    assert [f.rule for f in said] == [f.rule for f in expected]
    back = ortlab.DoctorResult.from_json(d.to_json())
    assert back.roofline is not None and back.roofline.rows == d.roofline.rows
