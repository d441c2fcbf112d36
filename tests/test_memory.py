"""Memory per node, as ORT's profiler records it: checked against the model's own weights and
the shapes the same events recorded, and for consistency with the allocator's peak; and the
session's resident footprint (fresh processes) against ORT's own arena counter."""

from __future__ import annotations

import numpy as np
import pytest
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
    # per EP, what its kernels wrote: each fused kernel once (crediting it to every original
    # node it fused would count Conv+Relu twice)
    s = pl.summary().set_index("provider")
    assert s.loc["CPUExecutionProvider", "output_bytes"] == prof["output_bytes"].clip(0).sum()
    assert "outputs/run" in pl._repr_html_()
    g = ortlab.graph(m, placement=pl)
    g.color_by = "memory"
    drawn = [n for n in g.graph_data.nodes if n.output_bytes > 0]
    assert len(drawn) >= checked and g.graph_data.has_memory and g.data["has_memory"]


# ---------------------------------------------------------------- the session's footprint


@pytest.fixture(scope="module")
def big_batch() -> ortlab.FootprintResult:
    """A small CNN at batch 128: its activations dwarf its weights, so the arena and the
    memory pattern decide what the session holds."""
    m = ortlab.examples.load("residual_cnn")
    return ortlab.footprint(m, dims={"batch": 128}, progress=False)


@pytest.mark.slow
def test_what_leaves_with_the_arena_is_what_orts_allocator_said_it_held(
    big_batch: ortlab.FootprintResult,
) -> None:
    """Two independent views: the kernel's resident set (fresh processes) and ORT's own arena
    counter (the profile). Switching the arena off frees what the arena held after a run."""
    m = ortlab.examples.load("residual_cnn")
    arena = ortlab.profile(m, dims={"batch": 128}, runs=3, progress=False).memory()
    held_by_arena = float(arena["arena_bytes"].iloc[-1])
    off = next(r for r in big_batch.rows if r.setting == "arena off")
    assert off.saves_held and off.saves_peak
    assert abs(-off.held_change - held_by_arena) <= 0.1 * held_by_arena, (
        off.held_change,
        held_by_arena,
    )
    assert off.confidence > 0.95 and off.held_low <= off.held_change <= off.held_high
    best = big_batch.best()
    assert best is not None and best.setting in ("arena off", "memory pattern off")
    assert big_batch.reference.peak >= big_batch.reference.held > 0
    text = big_batch.to_text()
    assert "arena off" in text and "fresh processes" in text
    assert big_batch.plot() is not None
    again = ortlab.FootprintResult.from_json(big_batch.to_json())
    assert again.best() is not None and again.best().setting == best.setting


@pytest.mark.slow
def test_a_session_holds_at_least_its_weights() -> None:
    """Weight-heavy model: whatever the settings, the session keeps its weights resident."""
    m = ortlab.examples.load("densenet121")
    fp = ortlab.footprint(m, settings={}, repeats=2, progress=False)
    weights = m.summary.initializer_bytes
    assert fp.reference.held >= 0.9 * weights, (fp.reference.held, weights)
    assert fp.savings() == [] and fp.best() is None
    assert "no setting" not in repr(fp)  # nothing else was tried, so nothing is claimed


@pytest.mark.slow
def test_doctor_turns_the_footprint_into_a_measured_memory_finding() -> None:
    m = ortlab.examples.load("residual_cnn")
    d = ortlab.doctor(m, dims={"batch": 64}, budget_s=60, quantize=False, progress=False)
    assert d.memory is not None
    [f] = [x for x in d.findings if x.rule == "memory"]
    best = d.memory.best()
    assert best is not None
    assert best.setting in f.title and "fresh processes" in f.evidence
    assert "ORT's allocator" in f.evidence
    from ortlab.diagnosis.counted import counted

    timed = {x.key: x for x in d.measured}
    assert f"memory:{best.setting}" in timed, "the memory fix is timed like any candidate"
    held = counted(timed, f"memory:{best.setting}")  # its re-measurement when there is one
    assert held is not None and f.ratio == held.row.paired.ratio
    assert f.code.startswith("SessionConfig(") and (
        "enable_cpu_mem_arena=False" in f.code or "enable_mem_pattern=False" in f.code
    )
    assert "memory" in d.stages
