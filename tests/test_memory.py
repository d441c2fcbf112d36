"""Memory per node, as ORT's profiler records it: checked against the model's own weights and
the shapes the same events recorded, and for consistency with the allocator's peak."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

import ortlab


def test_weights_and_outputs_match_the_model_and_the_shapes() -> None:
    """With prepacking off every weight is counted where the model has it; with it on (ORT's
    default) the CPU MatMul kernels repack their weights and ORT counts 0 bytes for them."""
    m = ortlab.load(ortlab.examples.mlp())
    unpacked = {"level": "disabled", "config_entries": {"session.disable_prepacking": "1"}}
    p = ortlab.profile(m, unpacked, runs=3, progress=False)  # nodes as exported
    t = p.by_node().set_index("node")
    weights = {w.name: numpy_helper.to_array(w).nbytes for w in m.proto.graph.initializer}
    for node in m.proto.graph.node:
        row = t.loc[node.name]
        assert row["parameter_bytes"] == sum(weights.get(i, 0) for i in node.input), node.name
        shapes = [
            np.prod(dims) * 4 for _, dims in p.data.output_types[p.data.node.index(node.name)]
        ]
        assert row["output_bytes"] == sum(shapes), node.name  # float32 outputs
        assert row["activation_bytes"] > 0
    packed = ortlab.profile(m, {"level": "disabled"}, runs=3, progress=False).by_node()
    matmuls = packed[packed["op_type"] == "MatMul"]
    assert (matmuls["parameter_bytes"] == 0).all(), "prepacked weights are not counted"


def test_allocator_figures_are_consistent_over_a_run() -> None:
    m = ortlab.examples.load("squeezenet")
    p = ortlab.profile(m, runs=3, progress=False)
    mem = p.memory()
    assert len(mem) == len(p.by_node()), "every node once, in execution order"
    assert (mem["start_us"].diff().dropna() >= 0).all()
    assert (mem[["in_use_bytes", "peak_bytes", "arena_bytes", "output_bytes"]] > 0).all().all()
    assert (mem["peak_bytes"].diff().dropna() >= 0).all(), "a peak so far never goes down"
    assert (mem["in_use_bytes"] <= mem["peak_bytes"]).all()
    assert (mem["peak_bytes"] <= mem["arena_bytes"]).all(), "the arena holds what was allocated"
    # the largest single output cannot exceed what the allocator had when it was produced
    assert mem["output_bytes"].max() <= mem["peak_bytes"].max()
    assert p.plot("memory") is not None


def test_memory_reaches_the_join_and_the_graph() -> None:
    m = ortlab.examples.load("squeezenet")
    pl = ortlab.placement(m, runs=2, progress=False)
    prof = pl.profile.by_node().set_index("node") if pl.profile is not None else None
    assert prof is not None
    checked = 0
    for r in pl.node_rows:
        if len(r.optimized) == 1 and r.optimized[0] in prof.index:
            assert r.output_bytes == prof.loc[r.optimized[0], "output_bytes"], r.node
            checked += 1
    assert checked > 20
    g = ortlab.graph(m, placement=pl)
    g.color_by = "memory"
    drawn = [n for n in g.data["nodes"] if n["output_bytes"] > 0]
    assert len(drawn) >= checked and g.data["has_memory"]
