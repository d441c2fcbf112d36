"""Node mapping by tensor names, on hand-built original/optimized pairs and real ORT output."""

from __future__ import annotations

import pytest
from onnx import helper

import ortlab
from ortlab.analysis.graph.mapping import OpNode, graph_nodes, map_nodes
from tests import models
from tests.reference import COMPUTES  # ORT's kernel names, independent of ortlab's table


def N(name: str, op: str, ins: list[str], outs: list[str], domain: str = "") -> OpNode:  # noqa: N802
    return OpNode(name, op, domain, tuple(ins), tuple(outs))


def test_conv_bn_relu_fused_into_one_node() -> None:
    original = [
        N("conv", "Conv", ["x", "w"], ["c"]),
        N("bn", "BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
        N("relu", "Relu", ["n"], ["r"]),
        N("head", "Relu", ["r"], ["y"]),
    ]
    optimized = [
        N("conv", "FusedConv", ["x", "w_fused", "b_fused"], ["r"], "com.microsoft"),
        N("head", "Relu", ["r"], ["y"]),
    ]
    m = map_nodes(original, optimized, ["w", "s", "b", "m", "v"], ["x"])
    assert m.status == {"conv": "fused", "bn": "fused", "relu": "fused", "head": "kept"}
    assert sorted(m.optimized_to_original["conv"]) == ["bn", "conv", "relu"]
    assert m.original_to_optimized["bn"] == ["conv"]
    assert m.unaccounted == []


def test_constant_folding_and_elimination() -> None:
    original = [
        N("shape_of_w", "Shape", ["w"], ["ws"]),  # constant: folded
        N("reshape", "Reshape", ["x", "ws"], ["r"]),
        N("identity", "Identity", ["r"], ["i"]),  # eliminated: consumer reads r directly
        N("out", "Relu", ["i"], ["y"]),
    ]
    optimized = [N("reshape", "Reshape", ["x", "ws_folded"], ["r"]), N("out", "Relu", ["r"], ["y"])]
    m = map_nodes(original, optimized, ["w"], ["x"])
    assert m.status["reshape"] == "kept"
    assert m.status["shape_of_w"] == "folded"
    # the vanished Identity sits between 'out' and a tensor ORT still produces: attributed to it
    assert m.status["identity"] == "fused" and "identity" in m.optimized_to_original["out"]
    assert m.unaccounted == []


def test_chain_joined_by_new_tensors_splits_at_name_anchors() -> None:
    """NCHWc: ReorderInput -> Conv(r2_nchwc) -> MaxPool(r3_nchwc) -> ReorderOutput, joined by
    new tensors, must not collapse into one group."""
    original = [
        N("n0", "Conv", ["x", "w"], ["r0"]),
        N("n1", "BatchNormalization", ["r0", "s", "b", "m", "v"], ["r1"]),
        N("n2", "Relu", ["r1"], ["r2"]),
        N("n3", "MaxPool", ["r2"], ["r3"]),
    ]
    optimized = [
        N("reorder_in", "ReorderInput", ["x"], ["x_nchwc"], "com.microsoft.nchwc"),
        N("r2_nchwc", "Conv", ["x_nchwc", "w2"], ["t2"], "com.microsoft.nchwc"),
        N("r3_nchwc", "MaxPool", ["t2"], ["t3"], "com.microsoft.nchwc"),
        N("reorder_out", "ReorderOutput", ["t3"], ["r3"], "com.microsoft.nchwc"),
    ]
    m = map_nodes(original, optimized, ["w", "s", "b", "m", "v"], ["x"])
    by = {tuple(g.optimized): (g.kind, sorted(g.original)) for g in m.groups}
    assert by[("r2_nchwc",)] == ("fused", ["n0", "n1", "n2"])
    assert by[("r3_nchwc",)] == ("rewritten", ["n3"])
    assert by[("reorder_in", "reorder_out")][0] == "inserted"
    assert m.unaccounted == []


def test_compiled_subgraph_expands_to_members() -> None:
    original = [
        N("relu", "Relu", ["x"], ["r"]),
        N("mul", "Mul", ["r", "two"], ["m"]),
        N("isnan", "IsNaN", ["m"], ["nan"]),
        N("where", "Where", ["nan", "zero", "m"], ["y"]),
    ]
    optimized = [
        N("OV_1", "EPContext", ["x"], ["m"], "com.microsoft"),
        N("isnan", "IsNaN", ["m"], ["nan"]),
        N("OV_2", "EPContext", ["nan", "m"], ["y"], "com.microsoft"),
    ]
    m = map_nodes(original, optimized, ["two", "zero"], ["x"])
    assert sorted(m.optimized_to_original["OV_1"]) == ["mul", "relu"]
    assert m.optimized_to_original["OV_2"] == ["where"]
    assert m.status["isnan"] == "kept"


def test_graph_nodes_names_unnamed_and_duplicate_nodes() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Relu", ["a"], ["b"], name="dup"),
        helper.make_node("Relu", ["b"], ["y"], name="dup"),
    ]
    m = models.make(nodes, [models.vi("x")], [models.vi("y")])
    names = [n.name for n in graph_nodes(m.graph)]
    assert names == ["Relu_0", "dup", "dup#1"]
    assert len(set(names)) == 3


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50", "bert_tiny"])
def test_every_original_node_accounted_at_every_level(name: str) -> None:
    """Done-means of the placement/optimization issue: nothing unaccounted, on real models."""
    m = ortlab.examples.load(name)
    opt = ortlab.optimization_diff(m, measure=False, progress=False)
    assert [lv.level for lv in opt.levels] == ["disabled", "basic", "extended", "layout", "all"]
    for lv in opt.levels:
        assert lv.unaccounted == []
        assert set(lv.status) == {n.name for n in graph_nodes(m.proto.graph)}
        assert set(lv.status.values()) <= {"kept", "rewritten", "fused", "folded", "eliminated"}
    disabled = opt.levels[0]
    assert set(disabled.status.values()) == {"kept"}, "no optimization: every node kept"


def test_no_node_unaccounted_on_a_control_flow_model() -> None:
    m = ortlab.load(models.with_if())
    opt = ortlab.optimization_diff(m, levels=["disabled", "all"], measure=False, progress=False)
    assert all(lv.unaccounted == [] for lv in opt.levels)


def test_nchwc_chain_credits_each_conv_to_its_conv_kernel() -> None:
    """At level 'all' a chain of Conv+SiLU blocks becomes one NCHWc group ending in several
    ReorderOutput nodes. Every original Conv must map to the ``…_nchwc`` Conv kernel that
    computes it, checked against the kernel's op type in ORT's own optimized graph (not a
    count: the old mapping credited most Convs to a ~2 µs ReorderOutput and left the Conv
    kernels with no original node)."""
    m = ortlab.load(models.silu_cnn())
    pl = ortlab.placement(m, {"level": "all"}, runs=2, warmup=1, progress=False)
    kernels = {r.node: r.op_type for r in pl.optimized_rows}
    assert any(k.endswith("_nchwc") for k in kernels), "ORT made no NCHWc kernels here"
    convs = [r for r in pl.node_rows if r.op_type == "Conv"]
    assert len(convs) == 5
    for r in convs:
        ops = {kernels[o] for o in r.optimized}
        assert ops & COMPUTES["Conv"], (r.node, r.optimized, ops)
    for r in pl.optimized_rows:
        if r.node.endswith("_nchwc") and r.op_type == "Conv":
            assert r.fused_from, f"{r.node} computes a Conv but is credited to no original node"
    # ReorderInput/ReorderOutput are inserted by ORT: no original node is theirs
    assert all(not r.fused_from for r in pl.optimized_rows if r.op_type.startswith("Reorder"))
