from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

import ortlab
from ortlab.core.errors import FeedError
from ortlab.engine.tasks import outputs as run_outputs
from tests import models

# Every element type ORT's CPU EP can take through Identity (opset 21).
RUNNABLE = [
    "FLOAT", "FLOAT16", "DOUBLE", "BFLOAT16", "INT8", "INT16", "INT32", "INT64", "UINT8",
    "UINT16", "UINT32", "UINT64", "BOOL", "STRING", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
    "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
]  # fmt: skip


@pytest.mark.parametrize("dtype", RUNNABLE)
def test_synthesized_feeds_run_for_every_dtype(dtype: str) -> None:
    m = ortlab.load(models.identity(getattr(TensorProto, dtype)))
    feeds = m.example_inputs(dims={"batch": 3}, seed=1)
    assert feeds["x"].shape == (3, 4)
    out = run_outputs(
        lambda *_: None,
        model_path=str(m.path),
        model_name=m.name,
        config=ortlab.SessionConfig(),
        feeds=feeds,
    )["outputs"]["y"]
    assert out.shape == (3, 4)
    if dtype == "STRING":
        assert (out == feeds["x"]).all()
    else:
        assert out.dtype == feeds["x"].dtype
        assert out.tobytes() == feeds["x"].tobytes()


def test_seeded_and_dims_reported(bert_tiny: ortlab.Model) -> None:
    a = bert_tiny.example_inputs(dims={"sequence": 32}, seed=0)
    b = bert_tiny.example_inputs(dims={"sequence": 32}, seed=0)
    c = bert_tiny.example_inputs(dims={"sequence": 32}, seed=1)
    np.testing.assert_array_equal(a["input_ids"], b["input_ids"])
    assert not np.array_equal(a["input_ids"], c["input_ids"])
    assert a["input_ids"].shape == (1, 32)
    assert a.dims["sequence"].why == "given"
    assert a.dims["batch"].value == 1 and "batch-like" in a.dims["batch"].why
    assert "batch=1 (default for batch-like dims)" in a.describe()


def test_integers_stay_inside_the_embedding_table(bert_tiny: ortlab.Model) -> None:
    feeds = bert_tiny.example_inputs(dims={"batch": 4, "sequence": 256})
    assert feeds["input_ids"].max() < 1000 and feeds["input_ids"].max() > 10
    assert (feeds["attention_mask"] == 1).all()
    assert any("size of the table it indexes" in n for n in feeds.notes)


def test_default_sequence_dim(bert_tiny: ortlab.Model) -> None:
    feeds = bert_tiny.example_inputs()
    assert feeds["input_ids"].shape == (1, 128)


def test_unknown_dims_name_is_a_warning_naming_the_models_dims() -> None:
    m = ortlab.load(models.identity(TensorProto.FLOAT))
    with pytest.warns(ortlab.OrtlabWarning, match=r"\['seq'\].*does not have.*\['batch'\]"):
        feeds = m.example_inputs(dims={"seq": 3})
    assert feeds.dims["batch"].value == 1  # the model's own dims, at their defaults


def test_absurd_dims() -> None:
    m = ortlab.load(models.add(["a", "b"]))
    with pytest.raises(FeedError, match="too large to synthesize"):
        m.example_inputs(dims={"a": 100_000, "b": 100_000})
    with pytest.raises(FeedError, match="not a usable size"):
        m.example_inputs(dims={"a": -1})


def test_negative_fixed_dim() -> None:
    m = ortlab.load(models.add([2, -3]))
    with pytest.raises(FeedError, match="negative dim"):
        m.example_inputs()


def test_validation_names_every_problem(bert_tiny: ortlab.Model) -> None:
    good = bert_tiny.example_inputs(dims={"sequence": 8})
    bad = {"input_ids": good["input_ids"].astype(np.int32), "extra": np.zeros(1)}
    with pytest.raises(FeedError) as info:
        ortlab.core.inputs.validate_feeds(bert_tiny, bad)
    text = str(info.value)
    assert "missing ['attention_mask']" in text
    assert "unknown ['extra']" in text
    assert "'input_ids': dtype int32, expected int64" in text
    assert "astype(np.int64)" in text
    assert "input_ids: int64[batch, sequence]" in text


def test_validation_rank_and_fixed_dims(resnet50: ortlab.Model) -> None:
    with pytest.raises(FeedError, match=r"rank 3 \[3, 224, 224\], expected rank 4"):
        ortlab.core.inputs.validate_feeds(
            resnet50, {"gpu_0/data_0": np.zeros((3, 224, 224), np.float32)}
        )
    with pytest.raises(FeedError, match="dim 2 is 200, expected 224"):
        ortlab.core.inputs.validate_feeds(
            resnet50, {"gpu_0/data_0": np.zeros((1, 3, 200, 224), np.float32)}
        )


def test_validation_symbolic_dims_must_agree(bert_tiny: ortlab.Model) -> None:
    feeds = {
        "input_ids": np.zeros((1, 8), np.int64),
        "attention_mask": np.ones((1, 9), np.int64),
    }
    with pytest.raises(FeedError, match="inputs sharing a symbolic dim must agree"):
        ortlab.core.inputs.validate_feeds(bert_tiny, feeds)


def test_validation_not_a_dict(mlp: ortlab.Model) -> None:
    with pytest.raises(FeedError, match="must be a dict"):
        ortlab.core.inputs.validate_feeds(mlp, [np.zeros((1, 256))])  # type: ignore[arg-type]


def test_bool_and_string_inputs_validate() -> None:
    m = ortlab.load(models.identity(TensorProto.BOOL))
    ok = ortlab.core.inputs.validate_feeds(m, {"x": np.zeros((2, 4), bool)})
    assert ok["x"].dtype == bool
    s = ortlab.load(models.identity(TensorProto.STRING))
    ortlab.core.inputs.validate_feeds(s, {"x": np.array([["a"] * 4] * 2)})
    with pytest.raises(FeedError, match="dtype float, expected string"):
        ortlab.core.inputs.validate_feeds(s, {"x": np.zeros((2, 4), np.float32)})
