from __future__ import annotations

from pathlib import Path

import pytest

import ortlab
from ortlab.analysis.optimizers.levels import OptimizationResult
from ortlab.core.errors import SessionConfigError
from tests import models


@pytest.fixture(scope="module")
def bert_opt() -> OptimizationResult:
    m = ortlab.examples.load("bert_tiny")
    return ortlab.optimization_diff(m, rounds=6, runs=3, dims={"sequence": 16}, progress=False)


def test_counts_and_fusions(bert_opt: OptimizationResult) -> None:
    counts = bert_opt.counts
    assert counts.index.tolist() == ["original", "disabled", "basic", "extended", "layout", "all"]
    assert counts.loc["original", "nodes"] == counts.loc["disabled", "nodes"] == 115
    assert counts.loc["basic", "nodes"] < 115 and counts.loc["extended", "nodes"] < 74
    assert counts.loc["basic", "LayerNormalization"] == 5
    assert counts.loc["extended", "com.microsoft.SkipLayerNormalization"] == 4
    fusions = bert_opt.fusions("extended")
    gelu = fusions[fusions["op_types"] == "BiasGelu"]
    assert len(gelu) == 2 and (gelu["n_original"] == 6).all()
    assert "Erf" in gelu.iloc[0]["original_ops"]
    assert bert_opt.fusions("disabled").empty


def test_fired_transformers_from_ort_log(bert_opt: OptimizationResult) -> None:
    assert bert_opt.fired("disabled").empty
    assert "LayerNormFusionL1" in bert_opt.fired("basic")["transformer"].tolist()
    extended = bert_opt.fired("extended")["transformer"].tolist()
    assert {"SkipLayerNormFusion", "BiasGeluFusion"} <= set(extended)


def test_latency_is_interleaved_and_paired(bert_opt: OptimizationResult) -> None:
    lat = bert_opt.latency
    assert lat["level"].tolist() == ["disabled", "basic", "extended", "layout", "all"]
    assert lat.loc[0, "ratio"] == 1.0 and lat.loc[0, "verdict"] == "baseline"
    assert (lat["ratio_low"] <= lat["ratio"]).all() and (lat["ratio"] <= lat["ratio_high"]).all()
    assert len(bert_opt.rounds_ms) == 6 and len(bert_opt.rounds_ms[0]) == 5
    for r in lat.iloc[1:].itertuples():
        models.check_verdict(r.ratio, r.ratio_low, r.ratio_high, r.verdict)


def test_mapping_and_files(bert_opt: OptimizationResult) -> None:
    from pathlib import Path

    from ortlab.core import cache

    table = bert_opt.mapping("extended")
    assert set(table["status"]) == {"kept", "fused"}
    for lv in bert_opt.levels:
        assert Path(lv.path).is_relative_to(cache.cache_dir())
        assert Path(lv.path).exists()
    with pytest.raises(SessionConfigError, match="Unknown optimization level 'o3'"):
        bert_opt.mapping("o3")


def test_json_round_trip_and_text(bert_opt: OptimizationResult) -> None:
    again = OptimizationResult.from_json(bert_opt.to_json())
    assert again == bert_opt
    assert "disabled" in bert_opt.to_text() and "<table" in bert_opt._repr_html_()


def test_initializers_as_inputs_blocker() -> None:
    m = ortlab.load(models.initializers_as_inputs())
    opt = ortlab.optimization_diff(m, levels=["disabled", "all"], measure=False, progress=False)
    (blocker,) = opt.blockers
    assert "5 initializers are also listed as graph inputs" in blocker
    assert "without_initializer_inputs" in blocker
    fixed = ortlab.without_initializer_inputs(m)
    assert fixed.summary.initializers_as_inputs == 0
    again = ortlab.optimization_diff(fixed, levels=["all"], measure=False, progress=False)
    assert again.blockers == []
    with pytest.raises(KeyError, match=r"was not measured; have \['all'\]"):
        again.fusions("basic")


def test_compiling_eps_are_refused_with_a_reason() -> None:
    with pytest.raises(SessionConfigError, match="compiling EP .*OpenVINO"):
        ortlab.optimization_diff(ortlab.examples.load("mlp"), config={"providers": ["openvino"]})


def test_levels_are_stored_once_per_model_whatever_the_threads(mlp: ortlab.Model) -> None:
    """The saved levels are keyed by what decides the graph, not by how it runs: a second call
    at other threads and spinning adds no file to the cache, and the ablation keeps none."""
    from ortlab.core import cache

    def files() -> set[Path]:
        return {p for p in cache.cache_dir().rglob("*.onnx*") if "tmp" not in p.parts}

    a = ortlab.optimization_diff(mlp, config={"intra_op_threads": 1}, measure=False, progress=False)
    before = files()
    b = ortlab.optimization_diff(
        mlp, config={"intra_op_threads": 2, "allow_spinning": False}, measure=False, progress=False
    )
    assert files() == before
    assert [lv.path for lv in a.levels] == [lv.path for lv in b.levels]
    ortlab.ablate_optimizers(mlp, rounds=2, runs=1, progress=False)
    assert files() == before
