from __future__ import annotations

import pytest

import ortlab
from ortlab.analysis.optimizers.transformers import infer_transformer_params


def test_parameters_inferred_from_the_graph(bert_tiny: ortlab.Model) -> None:
    model_type, heads, hidden, found = infer_transformer_params(bert_tiny.proto)
    assert (model_type, heads, hidden) == ("bert", 4, 128)
    assert "embedding table 'embeddings.word_embeddings.weight'" in found["hidden_size"]
    assert "Reshape '/encoder/layer.0/attention/self/query/Reshape'" in found["num_heads"]


def test_bert_tiny_attention_fuses(bert_tiny: ortlab.Model) -> None:
    tr = ortlab.transformer_optimize(bert_tiny)
    assert tr.attention_fused and tr.reason == ""
    assert tr.fused_operators["Attention"] == 2
    assert tr.fused_operators["SkipLayerNormalization"] == 4
    assert tr.nodes_after < tr.nodes_before / 3
    attention = tr.diff[tr.diff["optimized"].str.contains("Attention")]
    assert len(attention) == 2 and (attention["n_original"] > 10).all()
    assert set(tr.status.values()) <= {"kept", "rewritten", "fused", "folded", "eliminated"}
    again = ortlab.TransformerOptResult.from_json(tr.to_json())
    assert again == tr
    # the optimized model runs
    b = ortlab.benchmark(tr.path, runs=2, dims={"sequence": 16}, progress=False)
    assert b.stats.count == 2


def test_given_parameters_are_reported(bert_tiny: ortlab.Model) -> None:
    tr = ortlab.transformer_optimize(bert_tiny, num_heads=4, hidden_size=128)
    assert tr.found["num_heads"] == "4, given"


def test_no_attention_to_fuse_is_explained(mlp: ortlab.Model) -> None:
    tr = ortlab.transformer_optimize(mlp)
    assert not tr.attention_fused
    assert "no Softmax" in tr.reason


def test_opt_level_needs_torch(bert_tiny: ortlab.Model) -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed here")
    with pytest.raises(ortlab.OrtlabError, match="needs torch.*opt_level=0"):
        ortlab.transformer_optimize(bert_tiny, opt_level=2)


def test_a_cnn_is_not_called_a_vision_transformer(resnet50: ortlab.Model) -> None:
    """ResNet-50 has image inputs and Convs but no attention: never 'vit'."""
    model_type, _, _, found = infer_transformer_params(resnet50.proto)
    assert "Softmax" in {n.op_type for n in resnet50.proto.graph.node}  # its classifier's
    assert model_type != "vit" and "not a transformer" in found["model_type"]
