"""ortlab.whatif: predicted placement on targets that are not here, and why nodes fall back.

Golden fixtures (tests/data/whatif/qnn-<version>_<scenario>.log) are QNN's own verbose lines,
captured from real compile-only sessions on this wheel and trimmed; the expected verdicts below
were written by reading those files, not from the parser's output. The real-plugin tests check
ortlab's figures against ORT's and the usability checker's own APIs, called here directly.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from pathlib import Path

import pytest

import ortlab
from ortlab.analysis.placement.reasons import category, fix_for
from ortlab.analysis.placement.whatifresult import WhatIfError
from ortlab.cli import main
from ortlab.engine.verdicts import parse_qnn_log
from tests import corpus

DATA = Path(__file__).parent / "data" / "whatif"
HAS_QNN = importlib.util.find_spec("onnxruntime_qnn") is not None
HAS_OPENVINO = importlib.util.find_spec("onnxruntime_ep_openvino") is not None
needs_qnn = pytest.mark.skipif(
    not HAS_QNN and not os.environ.get("CI"), reason="onnxruntime-qnn is not installed"
)

DQL = (
    "Operators of type `DynamicQuantizeLinear` are not supported by QNN EP.DynamicQuantizeLinear "
    "node `{}` will not be assigned to QNN EP."
)
CONV_INT = (
    "Operators of type `ConvInteger` are not supported by QNN EP.ConvInteger node `{}` will not "
    "be assigned to QNN EP."
)
SHAPE = "Cannot get shape"


def _lines(name: str) -> list[str]:
    return (DATA / name).read_text().splitlines()


# ---------------------------------------------------------------------- golden logs


def test_qnn_log_ddddocr_verdicts_exactly() -> None:
    got = parse_qnn_log(_lines("qnn-2.7.0_ddddocr_int8.log"))
    assert got == {
        "input1_QuantizeLinear": DQL.format("input1_QuantizeLinear"),
        "Conv_0_quant_scales_mul": "",
        "392_tmp_qaunt": "",
        "392_quant_rounded": "",
        "392_quantized_node": "",
        "392_quantizedreshape": "",
        "Conv_0_quant": CONV_INT.format("Conv_0_quant"),
        "392_quantizedbias_add": SHAPE,
        "390_bias_add_cast": SHAPE,
        "Conv_0_quant_output_scale_mul": SHAPE,
        "Sigmoid_1": SHAPE,
        "Mul_2": SHAPE,
        "140_QuantizeLinear": DQL.format("140_QuantizeLinear"),
        "Conv_3_quant_scales_mul": "",
    }


def test_qnn_log_qdq_units_give_every_member_the_reason() -> None:
    got = parse_qnn_log(_lines("qnn-2.7.0_residual_qdq_dynamic.log"))
    members = [
        "input_QuantizeLinear",
        "input_DequantizeLinear",
        "stem.weight_DequantizeLinear",
        "stem.bias_DequantizeLinear",
        "/stem/Conv",
        "/stem/Relu_output_0_QuantizeLinear",
        "/stem/Relu_output_0_DequantizeLinear",
        "layer0.conv1.weight_DequantizeLinear",
        "/layer0/conv1/Conv",
        "/layer0/conv1/Relu_output_0_QuantizeLinear",
        "/layer0/conv1/Relu_output_0_DequantizeLinear",
        "layer0.conv2.weight_DequantizeLinear",
        "/layer0/conv2/Conv",
        "/layer0/conv2/Conv_output_0_QuantizeLinear",
        "/layer0/conv2/Conv_output_0_DequantizeLinear",
        "/stem/Relu_output_0_DequantizeLinear/duplicated",
        "/layer0/Add",
        "/layer0/Relu_output_0_QuantizeLinear",
    ]
    assert got == dict.fromkeys(members, SHAPE)


def test_qnn_log_repeated_validation_is_merged() -> None:
    """QNN validates twice per session: a repeat adds nothing; passed nodes stay ''."""
    got = parse_qnn_log(_lines("qnn-2.7.0_ppocrv4_rec_dynamic.log"))
    assert got == {
        "p2o.Conv.0": SHAPE,
        "p2o.Conv.1": SHAPE,
        "p2o.Mul.0": SHAPE,
        "p2o.Add.2": SHAPE,
        "p2o.Add.4": SHAPE,
        "p2o.Clip.0": SHAPE,
        "p2o.Slice.1": "",
        "p2o.Concat.0": "",
    }


def test_reason_categories_and_fixes() -> None:
    assert category(SHAPE) == "dynamic shape"
    assert category(DQL.format("x")) == "op not supported: DynamicQuantizeLinear"
    assert category("op not supported: ai.onnx:Sum") == "op not supported: Sum"
    assert (
        category("op not supported: ai.onnx:Shape; dynamic shape: input 'a' has no fixed shape")
        == "op not supported: Shape"
    )
    assert category("rank: an input has rank 6 > 5") == "rank"
    assert category("") == ""
    assert "dims=" in fix_for("dynamic shape", "QNNExecutionProvider", ["x[batch,3]"], fixed=False)
    assert "QDQ" in fix_for("op not supported: ConvInteger", "QNNExecutionProvider", [], fixed=True)
    assert "keep on CPU" in fix_for(
        "op not supported: Sum", "NnapiExecutionProvider", [], fixed=True
    )


# ---------------------------------------------------------------------- real runs


def _ort_qnn_assignment(path: str) -> dict[str, int]:
    """ORT's own assignment API on a compile-only QNN HTP session, built here directly."""
    from collections import Counter

    import onnxruntime as ort

    from ortlab.engine.plugins import plugin_devices

    with tempfile.TemporaryDirectory() as folder:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.log_severity_level = 3
        so.add_provider_for_devices(plugin_devices("QNNExecutionProvider"), {"backend_type": "htp"})
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        so.add_session_config_entry("ep.context_enable", "1")
        so.add_session_config_entry("ep.context_file_path", str(Path(folder) / "ctx.onnx"))
        sess = ort.InferenceSession(path, so)
        return dict(
            Counter(
                sg.ep_name
                for sg in sess.get_provider_graph_assignment_info()
                for _ in sg.get_nodes()
            )
        )


@pytest.mark.corpus
@needs_qnn
def test_qnn_compile_only_on_a_dynamically_quantized_model() -> None:
    m = corpus.load("ddddocr_int8")
    w = ortlab.whatif(m, ["qnn"], progress=False)
    qnn = w.summary().set_index("target").loc["qnn"]
    assert qnn["evidence"] == "compiled"
    ort_counts = _ort_qnn_assignment(str(m.path))
    assert qnn["level1_on_target"] == ort_counts["QNNExecutionProvider"]

    rows = w.nodes
    assert len(rows) == len(ortlab.load(m.path).proto.graph.node)  # one row per original node
    on_cpu = rows[rows["provider"] == "CPUExecutionProvider"]
    assert len(on_cpu) and (on_cpu["reason"] != "").all(), "a CPU node without a reason"
    on_qnn = rows[rows["provider"] == "QNNExecutionProvider"]
    assert len(on_qnn) and (on_qnn["reason"] == "").all()
    dql = rows[rows["op_type"] == "DynamicQuantizeLinear"]
    assert len(dql) and dql["reason"].str.contains("not supported").all()
    assert set(dql["category"]) == {"op not supported: DynamicQuantizeLinear"}
    assert set(rows["evidence"]) == {"compiled"}

    reasons = w.reasons()
    assert int(reasons["nodes"].sum()) == len(on_cpu)
    assert (
        "quantize for the NPU"
        in reasons.set_index("reason").loc["op not supported: ConvInteger", "fix"]
    )

    pl = w["qnn"]  # what ortlab.graph(m, placement=w["qnn"]) colours
    assert isinstance(pl, ortlab.PlacementResult)
    assert {r.time_source for r in pl.node_rows} == {"predicted: no time"}
    assert "predicted (compiled, not run)" in pl.notes[0]
    assert (pl.nodes["provider"] == "QNNExecutionProvider").sum() == len(on_qnn)

    back = ortlab.WhatIfResult.from_json(w.to_json())
    assert back.rows == w.rows and back["qnn"].node_rows == pl.node_rows


@pytest.mark.corpus
@needs_qnn
def test_fixing_the_shapes_puts_more_nodes_on_qnn() -> None:
    m = corpus.load("ppocrv4_rec")  # x: [p2o.DynamicDimension.0, 3, ?, p2o.DynamicDimension.1]
    chip = {"htp_arch": "73", "soc_model": "60"}  # default HTP settings fail the fixed compile
    dynamic = ortlab.whatif(m, ["qnn"], qnn_options=chip, progress=False)
    cats = dynamic.reasons().set_index("reason")
    assert "dynamic shape" in cats.index
    assert cats.loc["dynamic shape", "nodes"] > len(dynamic.nodes) / 2
    assert cats.loc["dynamic shape", "fix"].startswith("fix the input shapes")

    # The height dim is unnamed ('?'): dims= cannot name it, feeds= fixes every dim.
    fixed = ortlab.whatif(
        m, ["qnn"], feeds=corpus.feeds("ppocrv4_rec"), qnn_options=chip, progress=False
    )
    before = int(dynamic.summary()["on_target"][0])
    after = int(fixed.summary()["on_target"][0])
    assert fixed.before == {"qnn": before}
    assert before < after
    assert fixed.compare(dynamic)["change"][0] == before - after


@pytest.mark.corpus
@needs_qnn
def test_qnn_compiles_for_a_named_chip_by_default() -> None:
    """With QNN's own defaults the compile of this float CNN fails (QNN_COMMON_ERROR_MEM_ALLOC
    here): by default ortlab names a chip, says which, and the prediction equals ORT's own
    assignment read by the compile."""
    m = corpus.load("ppocrv4_rec")
    w = ortlab.whatif(m, ["qnn"], feeds=corpus.feeds("ppocrv4_rec"), progress=False)
    t = w.targets[0]
    assert t.evidence == "compiled", t.reason
    assert any("htp_arch=73, soc_model=60 (Snapdragon 8 Gen 2" in n for n in w.notes), w.notes
    assert int(w.summary()["on_target"][0]) > len(w.nodes) / 2


@pytest.mark.corpus
@needs_qnn
def test_a_failed_compile_is_reported_never_predicted() -> None:
    m = corpus.load("ppocrv4_rec")
    own = {"htp_arch": None, "soc_model": None}  # QNN's own defaults: no chip named
    w = ortlab.whatif(
        m, ["qnn"], feeds=corpus.feeds("ppocrv4_rec"), qnn_options=own, progress=False
    )
    t = w.targets[0]
    if t.evidence != "failed":
        pytest.skip("QNN's own default HTP settings compiled this model here")
    assert "compile failed" in t.reason
    assert "QNN options: QNN's own defaults" in t.reason and "soc_model" in t.reason
    assert set(w.nodes["provider"]) == {""}
    with pytest.raises(WhatIfError, match="compile failed"):
        w["qnn"]


def _checker_counts(path: str, target: str) -> dict[str, int]:
    """The usability checker as ORT's analyze_model runs it: on the basic-optimized model."""
    import onnx
    from onnxruntime.tools.mobile_helpers import usability_checker as uc
    from onnxruntime.tools.onnx_model_utils import optimize_model

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "m.onnx"
        optimize_model(Path(path), out, use_external_initializers=True)
        model = onnx.shape_inference.infer_shapes(onnx.load(str(out)))
    if target == "nnapi":
        info = uc.check_nnapi_partitions(model, require_fixed_input_sizes=True)
    else:
        info = uc.check_coreml_partitions(model, True, "coreml_supported_mlprogram_ops.md")
    return {"supported": info.num_supported_nodes, "partitions": info.num_partitions}


def test_nnapi_and_coreml_rules_match_the_checker() -> None:
    m = ortlab.examples.load("resnet50")
    w = ortlab.whatif(m, ["nnapi", "coreml"], progress=False)
    s = w.summary().set_index("target")
    for target in ("nnapi", "coreml"):
        own = _checker_counts(str(m.path), target)
        assert s.loc[target, "evidence"] == "rules"
        assert s.loc[target, "level1_on_target"] == own["supported"]
        assert s.loc[target, "partitions"] == own["partitions"]
        rows = w.nodes[w.nodes["target"] == target]
        assert set(rows["evidence"]) == {"rules"}
        off = rows[rows["provider"] == "CPUExecutionProvider"]
        assert (off["reason"] != "").all()
    sums = w.nodes[(w.nodes["op_type"] == "Sum") & (w.nodes["target"] == "nnapi")]
    assert len(sums) and set(sums["category"]) == {"op not supported: Sum"}


@pytest.mark.skipif(not HAS_OPENVINO, reason="onnxruntime-ep-openvino is not installed")
def test_openvino_without_a_device_says_so() -> None:
    w = ortlab.whatif(ortlab.examples.load("mlp"), ["openvino"], progress=False)
    t = w.targets[0]
    if t.evidence != "unknown":
        pytest.skip("the OpenVINO plugin lists a device on this machine")
    assert "no device" in t.reason
    assert set(w.nodes["provider"]) == {""}
    with pytest.raises(WhatIfError, match="no device"):
        w["openvino"]


def test_views_and_unknown_targets() -> None:
    w = ortlab.whatif(ortlab.examples.load("mlp"), ["nnapi", "cuda"], progress=False)
    text = w.to_text()
    assert "nnapi" in text and "cuda" in text
    assert "predicted, not measured" in w._repr_html_()
    fig = w.plot()
    assert len(fig.data) == 3
    cuda = w.targets[1]
    assert cuda.evidence in ("unknown", "measured")
    with pytest.raises(WhatIfError, match="not a target"):
        w["qnn"]


def test_cli_whatif(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["whatif", "mlp", "--targets", "nnapi,coreml", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ortlab"] == "WhatIfResult"
    back = ortlab.WhatIfResult.from_json(json.dumps(doc))
    assert [t.target for t in back.targets] == ["nnapi", "coreml"]
    assert main(["whatif", "mlp", "--targets", "nnapi"]) == 0
    assert "Why nodes fall back" in capsys.readouterr().out
    assert main(["whatif", "mlp", "--targets", "npu9000"]) == 2
    assert main(["whatif", "mlp", "--dims", "batch"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--targets" in err


def test_whatif_leaves_the_model_folder_and_cwd_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As tests/test_never_modify.py checks for every other verb: a fixed-shape copy goes to
    the cache, ORT's optimizer and QNN's context dump to private folders."""
    from ortlab.engine.worker import get_worker
    from tests.test_never_modify import _copy, _state

    path = _copy(tmp_path / "model", "bert_tiny", True)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    get_worker().stop()  # the next call starts a worker in this directory
    try:
        before = _state(path.parent)
        targets = ["nnapi", "coreml"] + (["qnn"] if HAS_QNN else [])
        ortlab.whatif(path, targets, dims={"batch": 1, "sequence": 8}, progress=False)
        assert _state(path.parent) == before
        assert list(cwd.iterdir()) == []
    finally:
        get_worker().stop()


@pytest.mark.corpus
@needs_qnn
def test_ort_warnings_that_say_falling_back_are_not_a_failed_compile() -> None:
    """At fixed shapes ORT logs "Error merging shape info … Falling back to lenient merge" for
    this model: not the Python wrapper's "Falling back to ['CPUExecutionProvider']"."""
    m = corpus.load("ddddocr_int8")
    chip = {"htp_arch": "73", "soc_model": "60"}
    w = ortlab.whatif(
        m, ["qnn"], feeds=corpus.feeds("ddddocr_int8"), qnn_options=chip, progress=False
    )
    s = w.summary().iloc[0]
    assert s["evidence"] == "compiled", w.targets[0].reason
    assert s["before"] < s["on_target"]
    left = set(w.reasons()["reason"])
    assert left and all(r.startswith("op not supported: ") for r in left)  # shapes fixed


def test_a_prediction_is_drawn_as_one_on_the_graph() -> None:
    """Nodes whose provider comes from a prediction are flagged for the view (drawn hatched,
    with a legend line); a measured placement's are not."""
    from ortlab.analysis.graph.data import graph_data

    m = ortlab.examples.load("resnet50")
    w = ortlab.whatif(m, targets=["nnapi"], progress=False)
    predicted = graph_data(m, placement=w["nnapi"])
    placed = [n for n in predicted.nodes if n.provider]
    assert placed and all(n.predicted and n.us_per_run == 0 for n in placed)
    assert {n.provider for n in placed} >= {"NnapiExecutionProvider", "CPUExecutionProvider"}
    measured = graph_data(m, placement=ortlab.placement(m, runs=1, warmup=0, progress=False))
    assert not any(n.predicted for n in measured.nodes)
    folder = Path(ortlab.__file__).parent / "views" / "graph"
    assert "it.predicted" in (folder / "draw.js").read_text()
    assert "n.predicted" in (folder / "overlays.js").read_text()


def _ort_cpu_assignment(path: str, level: str) -> int:
    """ORT's own count of the nodes it assigned in a CPU session at ``level``, built here."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return sum(len(sg.get_nodes()) for sg in sess.get_provider_graph_assignment_info())


def test_whatif_takes_a_config_in_every_verbs_place() -> None:
    """whatif(model, targets, config, feeds) as every verb orders them: the config's level
    builds the predicted sessions (basic without one), each target's count equals ORT's own
    at that level, and the result and its text say the level a config chose."""
    m = ortlab.examples.load("bert_tiny")
    plain = ortlab.whatif(m, ["cpu"], progress=False)
    off = ortlab.whatif(m, ["cpu"], {"level": "disabled"}, None, progress=False)
    assert (plain.level, off.level) == ("basic", "disabled")
    counts = {
        w.level: int(w.summary().set_index("target").loc["cpu", "level1_on_target"])
        for w in (plain, off)
    }
    assert counts == {
        "basic": _ort_cpu_assignment(str(m.path), "ORT_ENABLE_BASIC"),
        "disabled": _ort_cpu_assignment(str(m.path), "ORT_DISABLE_ALL"),
    }
    assert counts["disabled"] == len(m.proto.graph.node) > counts["basic"]  # nothing folded
    assert "level disabled" in off.to_text() and "level" not in plain.to_text().split("\n")[0]
    assert ortlab.WhatIfResult.from_json(off.to_json()).level == "disabled"
