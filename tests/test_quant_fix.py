"""Quantization error turned into a measured fix: the worst nodes left in float (or their
outputs at 16 bits) really are, and the fix is scored against the full int8 variant on the
same samples."""

from __future__ import annotations

import ortlab


def test_fix_spares_the_worst_nodes_and_beats_full_int8() -> None:
    m = ortlab.examples.load("squeezenet")
    q = ortlab.quantize(m, mode="static")
    err = ortlab.quantization_error(m, q)
    fix = err.fix(n=10)
    assert fix.nodes == list(dict.fromkeys(err.worst(len(err.tensors))["node"]))[:10]
    spared, wide = fix.variants
    assert "10 nodes left in float" in " ".join(spared.variant.steps)

    # the quantizer really ran with them excluded: a different graph (excluding a Relu can
    # even add Q/DQ pairs, as the Conv before it is no longer fused with it)
    assert len(spared.proto.graph.node) != len(q.proto.graph.node)
    assert any(n.domain == "com.microsoft" and n.op_type == "QuantizeLinear"
               for n in wide.proto.graph.node), "16-bit Q/DQ are ORT's contrib ops"  # fmt: skip
    cmp = ortlab.compare(m, [q, spared], rounds=6, runs=3, progress=False)
    t = cmp.to_pandas().set_index("variant")
    assert t.loc[spared.variant.label, "cosine"] > t.loc[q.variant.label, "cosine"]
