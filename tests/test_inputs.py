from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

import ortlab
from ortlab.core.errors import FeedError
from ortlab.core.feedcheck import validate_feeds
from ortlab.core.run import ModelJob
from ortlab.engine.tasks import outputs as run_outputs
from tests import models

# Every element type ORT's CPU EP can take through Identity (opset 21).
RUNNABLE = [
    "FLOAT",
    "FLOAT16",
    "DOUBLE",
    "BFLOAT16",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "BOOL",
    "STRING",
    "FLOAT8E4M3FN",
    "FLOAT8E4M3FNUZ",
    "FLOAT8E5M2",
    "FLOAT8E5M2FNUZ",
]


@pytest.mark.parametrize("dtype", RUNNABLE)
def test_synthesized_feeds_run_for_every_dtype(dtype: str) -> None:
    m = ortlab.load(models.identity(getattr(TensorProto, dtype)))
    feeds = m.example_inputs(dims={"batch": 3}, seed=1)
    assert feeds["x"].shape == (3, 4)
    out = run_outputs(
        lambda *_: None, ModelJob(str(m.path), m.name, ortlab.SessionConfig(), feeds)
    ).outputs["y"]
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
        validate_feeds(bert_tiny, bad)
    text = str(info.value)
    assert "missing ['attention_mask']" in text
    assert "unknown ['extra']" in text
    assert "'input_ids': dtype int32, expected int64" in text
    assert "astype(np.int64)" in text
    assert "input_ids: int64[batch, sequence]" in text


def test_validation_rank_and_fixed_dims(resnet50: ortlab.Model) -> None:
    with pytest.raises(FeedError, match=r"rank 3 \[3, 224, 224\], expected rank 4"):
        validate_feeds(resnet50, {"gpu_0/data_0": np.zeros((3, 224, 224), np.float32)})
    with pytest.raises(FeedError, match="dim 2 is 200, expected 224"):
        validate_feeds(resnet50, {"gpu_0/data_0": np.zeros((1, 3, 200, 224), np.float32)})


def test_validation_warns_when_symbolic_dims_disagree(bert_tiny: ortlab.Model) -> None:
    """Two inputs that give one dim name two values are said, not refused: onnxruntime checks
    fixed dims only (tests/test_not_stricter.py runs such feeds in plain onnxruntime)."""
    feeds = {
        "input_ids": np.zeros((1, 8), np.int64),
        "attention_mask": np.ones((1, 9), np.int64),
    }
    with pytest.warns(ortlab.OrtlabWarning, match="disagree on a dim the export names alike"):
        validate_feeds(bert_tiny, feeds)


def test_validation_not_a_dict(mlp: ortlab.Model) -> None:
    with pytest.raises(FeedError, match="must be a dict"):
        validate_feeds(mlp, [np.zeros((1, 256))])  # type: ignore[arg-type]


def test_bool_and_string_inputs_validate() -> None:
    m = ortlab.load(models.identity(TensorProto.BOOL))
    ok = validate_feeds(m, {"x": np.zeros((2, 4), bool)})
    assert ok["x"].dtype == bool
    s = ortlab.load(models.identity(TensorProto.STRING))
    validate_feeds(s, {"x": np.array([["a"] * 4] * 2)})
    with pytest.raises(FeedError, match="dtype float, expected string"):
        validate_feeds(s, {"x": np.zeros((2, 4), np.float32)})


@pytest.mark.corpus
def test_a_guessed_image_size_the_model_refuses_is_refitted() -> None:
    """The PP-OCRv4 recognizer (x: [N, 3, ?, W]) fails inside the network at the typical 224
    height; ortlab takes the middle of the band of typical sizes it runs at (48, what it was
    made for), says so, and never touches a dim that was given or a guess that runs. Plain
    onnxruntime is the independent check of what runs."""
    import onnxruntime as ort

    from ortlab.engine.calls import edge, fitted_dims
    from tests import corpus

    m = corpus.load("ppocrv4_rec")
    sess = ort.InferenceSession(str(m.path), providers=["CPUExecutionProvider"])

    def runs(h: int) -> bool:
        try:
            sess.run(None, {"x": np.zeros((1, 3, h, 224), np.float32)})
        except Exception:  # noqa: BLE001 - ORT's own failure is the answer
            return False
        return True

    f = edge(m, None, None).inputs
    height = f.dims["?"]
    assert height.value == 48 and "224 did not run" in height.why and "32..64" in height.why
    assert not runs(224) and runs(48), "plain onnxruntime agrees"
    assert [h for h in (32, 48, 64, 96) if runs(h)] == [32, 48, 64], "the band the reason names"
    assert "?=48" in f.guessed()
    given = fitted_dims(m, {"?": 224})
    assert given["?"].value == 224 and given["?"].why == "given"
    det = corpus.load("ppocrv4_det")  # its 224 guesses run: left as they are
    assert {c.value for c in fitted_dims(det, None).values() if "image" in c.why} == {224}


def test_a_run_that_fails_at_guessed_dims_says_they_were_guessed() -> None:
    """An image input no typical size fits (a Reshape to 3x7x7): the error says which dims
    were guessed and how to set them, not only ORT's message."""
    from onnx import helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "a", "b"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 147])
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [1, 147])
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], "fixed", [x], [y], [shape]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    m = ortlab.load(model)
    with pytest.raises(ortlab.RunError) as info:
        ortlab.benchmark(m, runs=2, warmup=1, progress=False)
    text = str(info.value)
    assert "were guessed" in text and "a=224" in text and "dims=" in text, text
    assert ortlab.benchmark(m, dims={"a": 7, "b": 7}, runs=2, progress=False).stats.count == 2


def test_a_derived_run_is_the_edges_model_at_other_dims() -> None:
    """Run.derive: the one way a stage gets a new Run. Its inputs at other dims are the
    edge's own at those dims (array for array), its model the same object (no second load or
    check), another config or inputs as given; a Run made by hand cannot invent inputs."""
    import numpy as np

    from ortlab.core.inputs import Feeds
    from ortlab.core.run import Run
    from ortlab.engine.calls import edge

    llm = ortlab.examples.load("tiny_llama_int4")
    first = edge(llm, None, None, dims={"prompt": 4, "past": 0, "batch": 1}, progress=False)
    at = {"prompt": 1, "past": 9, "batch": 2}
    derived = first.derive(dims=at, config=ortlab.SessionConfig(intra_op_threads=1))
    direct = edge(llm, None, None, dims=at, progress=False)
    assert derived.model is first.model and derived.progress is False
    assert derived.config == ortlab.SessionConfig(intra_op_threads=1)
    assert set(derived.inputs) == set(direct.inputs)
    for k, v in direct.inputs.items():
        assert np.array_equal(derived.inputs[k], v), k
    assert derived.inputs.dims["past"].value == 9
    same = first.derive(runs=5)
    assert same.inputs is first.inputs and same.runs == 5
    with pytest.raises(ValueError, match="dims or inputs"):
        first.derive(dims=at, inputs=first.inputs)
    by_hand = Run(first.model, first.config, Feeds(dict(first.inputs)))
    with pytest.raises(ValueError, match="not made by ortlab's edge"):
        by_hand.derive(dims=at)
