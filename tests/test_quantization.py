from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import ortlab
from ortlab.analysis.quantization.quantize import QuantConfig, QuantizationError, calibration_data
from tests import models


@pytest.fixture(scope="module")
def cnn() -> ortlab.Model:
    return ortlab.examples.load("residual_cnn")


def _samples(m: ortlab.Model, n: int = 4):
    for i in range(n):
        yield dict(m.example_inputs(seed=50 + i))


def test_dynamic_variant(mlp: ortlab.Model) -> None:
    before = mlp.path.read_bytes()
    q = ortlab.quantize(mlp, mode="dynamic")
    assert q.variant.label == "dynamic int8"
    assert any("quantize_dynamic" in s for s in q.variant.steps)
    assert any(s.startswith("quant_pre_process") for s in q.variant.steps)
    assert q.path != mlp.path and q.path.parent != mlp.path.parent
    assert q.path.stat().st_size < 0.4 * mlp.path.stat().st_size
    assert set(q.summary.op_types) & {"MatMulInteger", "DynamicQuantizeLinear"}
    assert mlp.path.read_bytes() == before


def test_static_qdq_from_a_generator(cnn: ortlab.Model) -> None:
    q = ortlab.quantize(
        cnn, QuantConfig(mode="static", format="qdq", per_channel=True, calibration=_samples(cnn))
    )
    assert q.variant.label == "static QDQ minmax per-channel"
    assert not q.variant.synthetic_calibration
    assert "4 samples from generator" in q.variant.calibration
    assert q.summary.op_types["QuantizeLinear"] > 0 and q.summary.op_types["DequantizeLinear"] > 0


def test_static_qoperator(cnn: ortlab.Model) -> None:
    q = ortlab.quantize(cnn, mode="static", format="qoperator", calibration=list(_samples(cnn, 2)))
    assert "QLinearConv" in q.summary.op_types


def test_synthetic_calibration_is_labelled(cnn: ortlab.Model) -> None:
    q = ortlab.quantize(cnn, mode="static", method="entropy", calibration_size=2)
    assert q.variant.synthetic_calibration and "synthetic" in q.variant.calibration


def test_fp16_keeps_io_types(mlp: ortlab.Model) -> None:
    h = ortlab.to_fp16(mlp)
    assert h.variant.label == "fp16"
    assert [t.dtype for t in h.inputs] == ["float"]
    assert h.path.stat().st_size < 0.6 * mlp.path.stat().st_size


def test_calibration_from_folder_and_dataframe(cnn: ortlab.Model, tmp_path: Path) -> None:
    name = cnn.inputs[0].name
    for i, s in enumerate(_samples(cnn, 3)):
        np.savez(tmp_path / f"s{i}.npz", **s)
        np.save(tmp_path / f"x{i}.npy", s[name])
    data = calibration_data(cnn, tmp_path)
    assert len(data.samples) == 6 and not data.synthetic
    df = pd.DataFrame({name: [s[name] for s in _samples(cnn, 2)]})
    assert len(calibration_data(cnn, df).samples) == 2
    with pytest.raises(QuantizationError, match=r"No \.npy/\.npz files"):
        calibration_data(cnn, tmp_path / "empty" if (tmp_path / "empty").mkdir() is None else "")


def test_bad_calibration_data(cnn: ortlab.Model) -> None:
    with pytest.raises(QuantizationError, match="calibration set .* is empty"):
        calibration_data(cnn, iter([]))
    with pytest.raises(QuantizationError, match=r"(?s)Calibration sample 0 .*missing"):
        calibration_data(cnn, [{"wrong": np.zeros((1, 3, 64, 64), np.float32)}])
    with pytest.raises(QuantizationError, match="dtype double, expected float"):
        calibration_data(cnn, [{cnn.inputs[0].name: np.zeros((1, 3, 64, 64))}])
    with pytest.raises(QuantizationError, match="not int"):
        calibration_data(cnn, 5)


def test_models_that_cannot_be_quantized(mlp: ortlab.Model) -> None:
    q = ortlab.quantize(mlp, mode="dynamic")
    with pytest.raises(QuantizationError, match="already quantized"):
        ortlab.quantize(q, mode="dynamic")
    with pytest.raises(QuantizationError, match="no op ORT quantizes.*Add"):
        ortlab.quantize(ortlab.load(models.add()), mode="dynamic")
    with pytest.raises(QuantizationError, match="QuantConfig.mode='int2'"):
        QuantConfig(mode="int2")
    with pytest.raises(QuantizationError, match=r"no setting 'perchannel'.*per_channel"):
        ortlab.quantize(mlp, mode="dynamic", perchannel=True)
    with pytest.raises(QuantizationError, match=r"op_types='MatMul': give a list"):
        QuantConfig(op_types="MatMul")  # type: ignore[arg-type]


def test_one_settings_type_from_the_user_to_the_worker_and_back(mlp: ortlab.Model) -> None:
    """The QuantConfig a user writes is what the worker runs and what the variant carries
    (without its calibration data); its JSON settings read back to the same config."""
    asked = QuantConfig(mode="dynamic", per_channel=True, nodes_to_exclude=["/layers.0/MatMul"])
    q = ortlab.quantize(mlp, asked)
    assert q.variant.config == asked and q.variant.config.calibration is None
    assert q.variant.label == asked.label() == "dynamic int8 per-channel · 1 nodes float"
    back = QuantConfig.from_settings(json.loads(json.dumps(asked.settings())))
    assert back == asked
    assert QuantConfig.of(asked, {"per_channel": False}) == QuantConfig(
        mode="dynamic", nodes_to_exclude=("/layers.0/MatMul",)
    )
    # the keywords change a config's settings, as ortlab.quantize takes them
    assert ortlab.quantize(mlp, asked, per_channel=False).variant.config.per_channel is False


def test_compare_small_model(mlp: ortlab.Model) -> None:
    d = ortlab.quantize(mlp, mode="dynamic")
    h = ortlab.to_fp16(mlp)
    c = ortlab.compare(mlp, [d, h], rounds=6, runs=5)
    t = c.to_pandas()
    assert t["variant"].tolist() == ["original (fp32)", "dynamic int8", "fp16"]
    assert t.loc[0, "ratio"] == 1.0 and t.loc[0, "cosine"] == pytest.approx(1.0)
    assert (t.loc[1:, "cosine"] > 0.99).all()
    assert c.synthetic and "SYNTHETIC" in c.to_text()
    assert "DynamicQuantizeMatMul" in c.rows[1].quantized_kernels or c.rows[1].quantized_kernels
    for row in c.rows[1:]:
        if row.paired.ratio > 1.0 and row.paired.low > 1.0:
            assert any(s.variant == row.variant and "too small" in s.signal for s in c.signals)
    assert ortlab.CompareResult.from_json(c.to_json()) == c
    fig = c.plot()
    assert len(fig.data[0].x) == 3


def test_quantization_error_located(cnn: ortlab.Model) -> None:
    q = ortlab.quantize(cnn, mode="static", calibration=list(_samples(cnn, 2)))
    err = ortlab.quantization_error(cnn, q, calibration=list(_samples(cnn, 2)))
    assert not err.synthetic and len(err.tensors) > 5
    worst = err.worst(3)
    assert worst["sqnr_db"].is_monotonic_increasing
    original = {n.name for n in cnn.proto.graph.node}
    assert set(err.nodes["node"]) <= original
    assert "worst" in repr(err)
    # the quantizer folds Relu into the Conv before it: the Relu's value is the DequantizeLinear
    # output after the Conv, not the (pre-activation) Conv output of the same name
    relu = err.to_pandas().query("op_type == 'Relu'")
    assert len(relu) and (relu["sqnr_db"] > 15).all(), relu


@pytest.mark.slow
def test_resnet50_static_qdq_runs_qlinear_kernels(resnet50: ortlab.Model) -> None:
    q = ortlab.quantize(resnet50, mode="static", per_channel=True, calibration_size=2)
    assert any("opset 9 -> 13" in s for s in q.variant.steps)
    c = ortlab.compare(resnet50, [q], rounds=2, runs=2)
    row = c.rows[1]
    assert row.quantized_kernels.get("QLinearConv", 0) >= 50
    assert row.size_ratio < 0.35


def test_the_baseline_row_says_what_its_weights_are(mlp: ortlab.Model) -> None:
    """A model whose weights are already int8 is not labelled "fp32" (it was), and the table
    says what cosine, SQNR and top-1 mean."""
    q = ortlab.quantize(mlp, mode="dynamic")
    c = ortlab.compare(q, [mlp], rounds=6, runs=3)
    assert c.to_pandas()["variant"].tolist()[0] == "original (int8)"
    from ortlab.analysis.quantization.quantize import precision_label

    assert precision_label(mlp) == "fp32" and precision_label(ortlab.to_fp16(mlp)) == "fp16"
    for text in (c.to_text(), c._repr_html_()):
        assert "blind to scale" in text and "time vs original" in text


def test_top1_is_scored_for_few_classes_and_top5_only_for_ten_or_more() -> None:
    """A 4-class classifier gets top-1 agreement (it showed "—"); top-5 of 4 classes would
    always agree, so it is not given."""
    from ortlab.analysis.quantization.metrics import error_metrics

    rng = np.random.default_rng(0)
    ref = rng.standard_normal((50, 4))
    test = ref + rng.standard_normal((50, 4)) * 0.5
    m = error_metrics([ref], [test])
    assert m["top1_agreement"] == np.mean(ref.argmax(1) == test.argmax(1))
    assert 0 < m["top1_agreement"] < 1 and "top5_agreement" not in m
    wide = error_metrics([rng.standard_normal((8, 12))], [rng.standard_normal((8, 12))])
    assert "top5_agreement" in wide


def test_quantization_error_types_the_model_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """It ran ONNX shape inference of the whole model once per tensor (421 times on picodet:
    6.7 s before the measuring began, outside every timeout); once is enough."""
    from ortlab.analysis.quantization import error as quant_error

    calls = []
    real = quant_error.inferred_graph

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(quant_error, "inferred_graph", counted)
    m = ortlab.examples.load("mlp")
    err = ortlab.quantization_error(m, ortlab.quantize(m, mode="dynamic"), limit=2)
    assert len(err.tensors) > 3 and len(calls) == 1
