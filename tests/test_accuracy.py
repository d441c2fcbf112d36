"""Accuracy figures: measured at the shapes that are timed, checked against plain onnxruntime,
and never "perfect" for degenerate outputs (NaN, all zeros)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlab
from ortlab.analysis.quantization.compare import error_metrics
from ortlab.analysis.quantization.quantize import calibration_data
from ortlab.core.errors import OrtlabWarning
from ortlab.core.feedcheck import validate_feeds

F = TensorProto.FLOAT


# ---------------------------------------------------------------------- degenerate outputs


def test_zero_reference_is_not_a_perfect_match() -> None:
    m = error_metrics([np.zeros((1, 4))], [np.ones((1, 4))])
    assert math.isnan(m["cosine"]) and math.isnan(m["sqnr_db"])
    assert "all zeros" in str(m["degenerate"])
    same = error_metrics([np.zeros((1, 4))], [np.zeros((1, 4))])
    assert math.isnan(same["cosine"]) and "identical" in str(same["degenerate"])
    assert same["max_abs"] == 0.0


def test_nan_variant_is_not_a_perfect_match() -> None:
    m = error_metrics([np.ones((2, 3))], [np.full((2, 3), np.nan)])
    assert math.isnan(m["cosine"]) and "variant's output holds NaN" in str(m["degenerate"])
    ref = error_metrics([np.array([[np.nan, 1.0]])], [np.array([[np.nan, 1.0]])])
    assert "float model's output holds NaN" in str(ref["degenerate"])


def test_top1_only_for_class_scores() -> None:
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((1, 100))
    assert "top1_agreement" in error_metrics([scores], [scores + 1e-3])
    boxes = rng.standard_normal((1, 84, 50))  # a detector's head: not class scores
    assert "top1_agreement" not in error_metrics([boxes], [boxes + 1e-3])
    seq = rng.standard_normal((1, 40, 30))  # an OCR recognizer's per-step scores
    assert "top1_agreement" not in error_metrics([seq], [seq])


def _log_model() -> onnx.ModelProto:
    """y = Log(x): NaN for negative inputs, as a float model with a broken output would be."""
    g = helper.make_graph(
        [helper.make_node("Log", ["x"], ["y"])],
        "nan_out",
        [helper.make_tensor_value_info("x", F, [1, 8])],
        [helper.make_tensor_value_info("y", F, [1, 8])],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_compare_warns_when_the_float_model_itself_gives_nan() -> None:
    m = ortlab.load(_log_model(), name="nan_out")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        cmp = ortlab.compare(m, [ortlab.load(_log_model(), name="copy")], rounds=6, runs=1)
    said = [w for w in seen if issubclass(w.category, OrtlabWarning)]
    assert any("holds NaN" in str(w.message) for w in said)
    assert any("holds NaN" in n for n in cmp.notes)
    assert math.isnan(float(cmp.rows[1].errors["y"]["cosine"]))


# ---------------------------------------------------------------------- the timed shapes


def test_compare_measures_accuracy_at_the_feeds_shapes(bert_tiny: ortlab.Model) -> None:
    """bert_tiny's sequence dim defaults to 128; timed at 16, accuracy must be at 16 too, and
    equal plain onnxruntime's on the same samples (it was measured at 128)."""
    feeds = bert_tiny.example_inputs(dims={"batch": 1, "sequence": 16}, seed=3)
    q = ortlab.quantize(bert_tiny, mode="dynamic")
    cmp = ortlab.compare(bert_tiny, [q], feeds=feeds, rounds=6, runs=2)
    samples = calibration_data(
        bert_tiny, None, limit=8, seed=100, like=validate_feeds(bert_tiny, feeds)
    ).samples
    assert all(np.shape(v) == (1, 16) for s in samples for v in s.values())
    assert any("[1, 16]" in n for n in cmp.notes), cmp.notes
    sessions = [
        ort.InferenceSession(str(x.path), providers=["CPUExecutionProvider"])
        for x in (bert_tiny, q)
    ]
    name = sessions[0].get_outputs()[0].name
    r, t = ([np.ravel(s.run([name], x)[0]) for x in samples] for s in sessions)
    ref, got = np.concatenate(list(r)), np.concatenate(list(t))
    plain = float(ref @ got / (np.linalg.norm(ref) * np.linalg.norm(got)))
    assert cmp.rows[1].errors[name]["cosine"] == pytest.approx(plain, abs=1e-6)


def test_callers_feeds_are_the_first_sample_and_synthetic_ones_follow_their_shapes() -> None:
    m = ortlab.load(_log_model(), name="m")
    mine = {"x": np.full((1, 8), 2.0, dtype=np.float32)}
    cal = calibration_data(m, None, limit=4, seed=1, like=validate_feeds(m, mine))
    assert np.array_equal(cal.samples[0]["x"], mine["x"])
    assert cal.synthetic and "feeds given + 3 synthetic" in cal.source


# ---------------------------------------------------------------------- the doctor


def _chain(depth: int, nan: bool) -> onnx.ModelProto:
    """``depth`` MatMul+Relu layers; with ``nan`` the output is multiplied by NaN (a broken
    variant that is also much faster when depth is small)."""
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(depth):
        w = numpy_helper.from_array(
            (rng.standard_normal((256, 256)) * 0.05).astype(np.float32), f"w{i}"
        )
        inits.append(w)
        nodes += [
            helper.make_node("MatMul", [prev, w.name], [f"m{i}"]),
            helper.make_node("Relu", [f"m{i}"], [f"r{i}"]),
        ]
        prev = f"r{i}"
    if nan:
        inits.append(numpy_helper.from_array(np.array([np.nan], dtype=np.float32), "nan"))
        nodes.append(helper.make_node("Mul", [prev, "nan"], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", [prev], ["y"]))
    g = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", F, [64, 256])],
        [helper.make_tensor_value_info("y", F, [64, 256])],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.slow
def test_a_faster_variant_that_outputs_nan_is_never_the_best() -> None:
    """min(1.0, nan) is 1.0 in Python: an all-NaN variant used to pass for accurate."""
    base = ortlab.load(_chain(12, nan=False), name="chain")
    broken = ortlab.load(_chain(1, nan=True), name="broken")
    d = ortlab.doctor(
        base,
        variants=[broken],
        quantize=False,
        transformers=False,
        budget_s=60,
        rounds=6,
        progress=False,
    )
    row = next(m for m in d.measured if m.variant == "broken" and m.stage == "screen")
    assert row.paired.ratio < 1, (
        "the broken variant should time faster (else the test proves nothing)"
    )
    assert row.cosine == 0.0
    assert d.best.variant != "broken"
