"""One optimizer at a time: the disabled transformer is really gone (checked against plain
onnxruntime's own ``disabled_optimizers``), and the ablation's rows agree with it."""

from __future__ import annotations

from pathlib import Path

import onnx
import onnxruntime as ort
import pytest

import ortlab
from ortlab.core.options import ort_options

FUSION = "SkipLayerNormFusion"


def _plain_nodes(model: ortlab.Model, tmp: Path, disabled: list[str]) -> tuple[int, set[str]]:
    """Plain onnxruntime: optimize at level all with ``disabled_optimizers`` and count."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.optimized_model_filepath = str(tmp / "plain.onnx")
    ort.InferenceSession(
        str(model.path), so, providers=["CPUExecutionProvider"], disabled_optimizers=disabled
    )
    g = onnx.load(str(tmp / "plain.onnx")).graph
    return len(g.node), {n.op_type for n in g.node}


def test_config_field_reaches_the_session_options() -> None:
    cfg = ortlab.SessionConfig(disabled_optimizers=[FUSION, "ConstantFolding"])
    assert ort_options(cfg).entries["optimization.disable_specified_optimizers"] == (
        "ConstantFolding,SkipLayerNormFusion"
    )
    assert "optimization.disable_specified_optimizers" in cfg.snippet()
    assert "−SkipLayerNormFusion" in cfg.label()
    assert ortlab.SessionConfig.from_json(cfg.to_json()) == cfg
    with pytest.raises(ortlab.SessionConfigError, match="not a transformer name"):
        ortlab.SessionConfig(disabled_optimizers=["Skip Layer Norm"])


def test_disable_really_removes_the_fusion(tmp_path: Path) -> None:
    m = ortlab.examples.load("bert_tiny")
    on = ortlab.optimization_diff(m, ["all"], measure=False, progress=False)
    off = ortlab.optimization_diff(m, ["all"], measure=False, disable=[FUSION], progress=False)
    assert FUSION in set(on.fired("all")["transformer"])
    assert FUSION not in set(off.fired("all")["transformer"])
    assert on.counts.loc["all"].get("com.microsoft.SkipLayerNormalization", 0) > 0
    assert off.counts.loc["all"].get("com.microsoft.SkipLayerNormalization", 0) == 0
    nodes, ops = _plain_nodes(m, tmp_path, [FUSION])
    assert off.counts.loc["all", "nodes"] == nodes and "SkipLayerNormalization" not in ops
    with pytest.raises(ortlab.SessionConfigError, match="ORT runs no transformer"):
        ortlab.optimization_diff(
            m, ["all"], measure=False, disable=["NoSuchFusion"], progress=False
        )


def test_ablation_rows_match_plain_onnxruntime(tmp_path: Path) -> None:
    m = ortlab.examples.load("bert_tiny")
    a = ortlab.ablate_optimizers(m, only=[FUSION, "GeluFusionL2"], rounds=6, runs=3, progress=False)
    t = a.to_pandas().set_index("off")
    assert list(t.index) == ["", FUSION, "GeluFusionL2"]
    base_nodes, _ = _plain_nodes(m, tmp_path, [])
    assert t.loc["", "nodes"] == base_nodes
    for name in (FUSION, "GeluFusionL2"):
        nodes, _ = _plain_nodes(m, tmp_path, [name])
        assert t.loc[name, "nodes"] == nodes and t.loc[name, "node_change"] > 0
        assert t.loc[name, "fired"] >= 1 and t.loc[name, "create_ms"] > 0
        # its own time in the baseline's build is part of that build
        assert 0 < t.loc[name, "own_ms"] < t.loc["", "create_ms"]
        assert t.loc[name, "ratio_low"] <= t.loc[name, "ratio"] <= t.loc[name, "ratio_high"]
        assert t.loc[name, "cosine"] > 0.999, "a fusion does not change what is computed"
    assert t.loc["", "max_abs"] == 0.0, "the baseline against itself"
    assert "without SkipLayerNormFusion" in t.loc[FUSION, "verdict"]
    assert "<table" in a._repr_html_() and a.plot() is not None
