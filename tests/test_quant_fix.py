"""Quantization error turned into a measured fix: the worst nodes left in float (or their
outputs at 16 bits) really are, and the fix is scored against the full int8 variant on the
same samples."""

from __future__ import annotations

import numpy as np
import pytest

import ortlab


@pytest.mark.slow
def test_fix_spares_the_worst_nodes() -> None:
    m = ortlab.examples.load("squeezenet")
    # the bundled model's seeded weights are scaled for standard-normal inputs: calibrate and
    # score with those (without feeds ortlab clips image inputs to a pixel range)
    rng = np.random.default_rng(7)
    x = m.inputs[0]
    samples = [{x.name: rng.standard_normal([1, 3, 224, 224]).astype(np.float32)} for _ in range(8)]
    q = ortlab.quantize(m, mode="static", calibration=samples)
    err = ortlab.quantization_error(m, q, samples)
    fix = err.fix(n=10)
    assert fix.nodes == list(dict.fromkeys(err.worst(len(err.tensors))["node"]))[:10]
    spared, wide = fix.variants
    assert "10 nodes left in float" in " ".join(spared.variant.steps)
    # named after the model, as every other variant is (they carried the cache file's name,
    # "squeezenet-s0-v3-onnx1.23.2 [...]", into the report)
    assert spared.name.startswith("squeezenet [") and wide.name.startswith("squeezenet [")
    assert spared.variant.base == wide.variant.base == "squeezenet"

    # the quantizer really ran with them excluded: a different graph (excluding a Relu can
    # even add Q/DQ pairs, as the Conv before it is no longer fused with it)
    assert len(spared.proto.graph.node) != len(q.proto.graph.node)
    assert any(
        n.domain == "com.microsoft" and n.op_type == "QuantizeLinear" for n in wide.proto.graph.node
    ), "16-bit Q/DQ are ORT's contrib ops"
    # The spared variant is measured like any other. Whether it beats the full int8 is data:
    # on squeezenet's random weights the lowest-SQNR tensors are the deepest ones, whose error
    # comes from upstream, so leaving them in float moves the final cosine by ~1e-4 either way.
    cmp = ortlab.compare(m, [q, spared], rounds=6, runs=3, progress=False, eval_data=samples)
    t = cmp.to_pandas().set_index("variant")
    assert t.loc[spared.variant.label, "cosine"] > 0.99
    assert t.loc[spared.variant.label, "cosine"] != t.loc[q.variant.label, "cosine"]


@pytest.mark.slow
def test_the_doctor_proposes_the_fix_it_measured() -> None:
    """An int8 variant below min_cosine: the doctor builds the fix variants, times them against
    the original and the full int8 in the same interleaved rounds, scores them on the same
    samples, and its quantization finding proposes the better one."""
    m = ortlab.examples.load("squeezenet")
    d = ortlab.doctor(m, budget_s=120, min_cosine=0.9999, memory=False, progress=False)
    meas = {x.key: x for x in d.measured}
    full = meas["variant:quant-static"]
    assert full.cosine < 0.9999
    fixes = [
        x
        for k, x in meas.items()
        if k.startswith("variant:quant-static-") and not k.endswith("+final")
    ]
    assert {x.key for x in fixes} == {"variant:quant-static-spare5", "variant:quant-static-16bit5"}
    assert max(x.cosine for x in fixes) > full.cosine, "sparing the worst nodes helps"
    assert all(
        x.paired.rounds > 0 and x.paired.low <= x.paired.ratio <= x.paired.high for x in fixes
    )
    [f] = [x for x in d.findings if x.rule == "quantization"]
    assert len(f.nodes) == 5 and all(n in f.evidence for n in f.nodes)
    best = max(fixes, key=lambda x: x.cosine)
    assert best.variant in f.fix and f"cosine {best.cosine:.4f}" in f.evidence
    assert "fix(n=5)" in f.code and f.ratio == best.paired.ratio
    assert d.plot("pareto") is not None  # the fixes are on the doctor's Pareto chart
