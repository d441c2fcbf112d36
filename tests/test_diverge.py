"""Where two runs stop agreeing (issue 49): a planted divergence in a 1,000-node model located
exactly in a bounded number of session runs; the repro it writes reproduces in plain
onnxruntime (exit 1) and stops when the divergence is gone (exit 0); per-tensor errors equal a
hand-written loop over plain onnxruntime sessions (level disabled vs all; fp32 vs an fp16
variant); sessions that agree report nothing; bad requests are refused before any work; the
shell verb; and (marked openvino) a real EP pair end to end."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import ortlab
from ortlab.cli import main
from ortlab.core.errors import OptionError
from tests import models

PLANT = 601


def save_float_model(
    path: Path,
    name: str,
    nodes: list[onnx.NodeProto],
    initializers: list[onnx.TensorProto],
    output: str,
    shape: list[int],
) -> Path:
    """Save ``nodes`` as a model from float ``x`` to float ``output``, both of ``shape``."""
    io = [models.vi("x", shape=shape)], [models.vi(output, shape=shape)]
    onnx.save(models.make(nodes, *io, initializers, name=name), path)
    return path


def chain(path: Path, plant: int | None = None, n: int = 1000) -> Path:
    """x -> Add(c0) -> Mul(c1) -> ... (n nodes, each with its own constant); with ``plant``
    that node's constant has half its signs flipped (an edited copy, a broken weight)."""
    rng = np.random.default_rng(0)
    nodes, weights, x = [], [], "x"
    for i in range(n):
        op = "Add" if i % 2 == 0 else "Mul"
        c = rng.random((1, 64)).astype(np.float32) * 0.1 + (0.0 if op == "Add" else 0.95)
        if plant == i:
            c[0, :32] *= -1
        weights.append(numpy_helper.from_array(c, f"c{i}"))
        nodes.append(helper.make_node(op, [x, f"c{i}"], [f"t{i}"], name=f"n{i}"))
        x = f"t{i}"
    return save_float_model(path, "chain", nodes, weights, x, [1, 64])


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Any]:
    tmp = tmp_path_factory.mktemp("diverge")
    a, b = chain(tmp / "a.onnx"), chain(tmp / "b.onnx", plant=PLANT)
    return a, b, ortlab.diverge(a, b, progress=False)


def exposed(path: Path, tensors: list[str], level: str, feeds: dict[str, Any]) -> list[Any]:
    """The hand-written reference: plain onnxruntime with ``tensors`` made outputs."""
    import onnxruntime as ort

    model = onnx.load(path)
    have = {o.name for o in model.graph.output}
    model.graph.output.extend(
        helper.make_empty_tensor_value_info(t) for t in tensors if t not in have
    )
    so = ort.SessionOptions()
    so.graph_optimization_level = {
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[level]
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return list(sess.run(tensors, feeds))


def _cosine(a: Any, b: Any) -> float:
    r, t = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    norm = float(np.sqrt(r @ r) * np.sqrt(t @ t))
    return float(r @ t) / norm if norm else 1.0


def test_a_planted_divergence_is_located_exactly(planted: tuple[Path, Path, Any]) -> None:
    a, b, r = planted
    assert r.first is not None
    assert (r.first.node, r.first.op_type, r.first.index) == (f"n{PLANT}", "Mul", PLANT)
    assert r.first.introduced > r.threshold and r.first.inputs == [f"t{PLANT - 1}", f"c{PLANT}"]
    assert r.session_runs <= 12, r.session_runs
    errors = {t.index: r.error(t) for t in r.tensors}
    assert len(errors) == 1000
    assert all(errors[k] == 0 for k in range(PLANT))
    assert all(errors[k] > r.threshold for k in range(PLANT, 1000))
    feeds = {"x": _feeds(r)}
    mine = _cosine(*(exposed(p, [f"t{PLANT}"], "all", feeds)[0] for p in (a, b)))
    row = next(t for t in r.tensors if t.index == PLANT)
    assert row.cosine == pytest.approx(mine, abs=1e-9)
    assert r.to_pandas()["first"].sum() == 1
    assert len(str(r)) < 400 and f"'n{PLANT}' (Mul" in str(r)  # print(): the verdict, not rows
    assert f"node 'n{PLANT}' (Mul" in r.to_text()
    assert "ortlab-diverge" in r._repr_html_()
    fig = r.plot()
    assert any((t.name or "").startswith("first: n601") for t in fig.data)
    back = ortlab.DivergenceResult.from_json(r.to_json())
    assert back.first == r.first and len(back.tensors) == len(r.tensors)


QDQ_PLANT = 150


def _orthogonal(rng: np.random.Generator) -> np.ndarray:
    """A random rotation (32 x 32): activations keep their size through 250 blocks, inside
    the int8 range the scales give."""
    q, _ = np.linalg.qr(rng.normal(size=(32, 32)))
    return q.astype(np.float32)


def qdq_chain(path: Path, plant: int | None = None, blocks: int = 250) -> Path:
    """A QDQ model of 1,000 nodes: per block x -> QuantizeLinear -> DequantizeLinear (one int8
    scale each, as a static quantizer writes them) -> MatMul (a rotation) -> Add (a small
    bias); with ``plant`` that
    block's scale is 8x coarser (one QDQ scale changed)."""
    rng = np.random.default_rng(1)
    nodes, inits, x = [], [], "x"
    for i in range(blocks):
        scale = np.float32(6.0 / 127) * (8 if plant == i else 1)
        inits += [
            numpy_helper.from_array(np.array(scale, np.float32), f"s{i}"),
            numpy_helper.from_array(np.array(0, np.int8), f"z{i}"),
            numpy_helper.from_array(_orthogonal(rng), f"w{i}"),
            numpy_helper.from_array(rng.normal(0, 0.01, (32,)).astype(np.float32), f"b{i}"),
        ]
        nodes += [
            helper.make_node("QuantizeLinear", [x, f"s{i}", f"z{i}"], [f"q{i}"], name=f"q{i}"),
            helper.make_node(
                "DequantizeLinear", [f"q{i}", f"s{i}", f"z{i}"], [f"d{i}"], name=f"dq{i}"
            ),
            helper.make_node("MatMul", [f"d{i}", f"w{i}"], [f"m{i}"], name=f"mm{i}"),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
        ]
        x = f"a{i}"
    return save_float_model(path, "qdq_chain", nodes, inits, x, [4, 32])


def test_a_planted_qdq_scale_is_located_exactly(tmp_path: Path) -> None:
    """One QDQ scale 8x coarser in a copy of a 1,000-node QDQ chain: the first divergence is
    the DequantizeLinear that reads it (its int8 input is not a float tensor to compare; run
    alone on the reference's int8 it gives another value), found in <= 12 session runs, every
    float tensor before it identical; and the repro reproduces."""
    a, b = qdq_chain(tmp_path / "a.onnx"), qdq_chain(tmp_path / "b.onnx", plant=QDQ_PLANT)
    r = ortlab.diverge(a, b, progress=False)
    assert r.first is not None, r.notes
    assert (r.first.node, r.first.op_type) == (f"dq{QDQ_PLANT}", "DequantizeLinear")
    assert r.first.introduced > r.threshold and f"s{QDQ_PLANT}" in r.first.inputs
    assert r.session_runs <= 12, r.session_runs
    before = [t for t in r.tensors if t.index < r.first.index]
    assert before and all(r.error(t) == 0 for t in before)
    assert all(t.op_type != "QuantizeLinear" for t in r.tensors)  # int8: not compared
    assert r.first.region == [f"q{QDQ_PLANT}", f"dq{QDQ_PLANT}"]  # the DQ alone only rescales
    assert f"run alone with 'q{QDQ_PLANT}' (the nodes before it" in r.to_text()
    assert r.first.providers == ("CPUExecutionProvider", "CPUExecutionProvider")
    made = [f"QuantizeLinear q{QDQ_PLANT}", f"DequantizeLinear dq{QDQ_PLANT}"]
    assert r.first.kernels == (made, made)  # what each session made of the region, alone
    assert "runs it on CPUExecutionProvider as QuantizeLinear" in r.to_text()
    script = r.save_repro(tmp_path / "repro")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    assert run.returncode == 1, run.stdout + run.stderr


def _feeds(r: Any) -> Any:
    """The synthetic input the result ran at (seed 0, as ortlab makes it)."""
    m = ortlab.load(r.reference_path)
    return m.example_inputs(seed=0)["x"]


def test_the_repro_reproduces_in_plain_onnxruntime(
    planted: tuple[Path, Path, Any], tmp_path: Path
) -> None:
    _, _, r = planted
    script = r.save_repro(tmp_path / "repro")
    assert sorted(p.name for p in script.parent.iterdir()) == [
        "inputs.npz",
        "other.onnx",
        "reference.onnx",
        "repro.py",
    ]
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "cosine" in run.stdout and "> threshold" in run.stdout
    shutil.copyfile(script.parent / "reference.onnx", script.parent / "other.onnx")  # fixed
    again = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=False
    )
    assert again.returncode == 0, again.stdout + again.stderr
    with pytest.raises(OptionError, match="already holds a repro"):
        r.save_repro(tmp_path / "repro")


@pytest.mark.slow
def test_level_disabled_vs_all_equals_plain_onnxruntime() -> None:
    """On ResNet-50 the per-tensor cosines equal a loop over plain onnxruntime sessions with
    the same tensors exposed."""
    m = ortlab.examples.load("resnet50")
    r = ortlab.diverge(m, {"level": "disabled"}, {"level": "all"}, progress=False)
    feeds = m.example_inputs(seed=0)
    picked = [t.tensor for t in r.tensors[:: max(len(r.tensors) // 6, 1)]]
    ref = exposed(m.path, picked, "all", feeds)
    other = exposed(m.path, picked, "disabled", feeds)
    rows = {t.tensor: t for t in r.tensors}
    for name, x, y in zip(picked, ref, other, strict=True):
        assert rows[name].cosine == pytest.approx(_cosine(x, y), abs=1e-7), name
    assert r.other.endswith("disabled") and len(r.finals) == 1


def test_fp16_variant_errors_equal_plain_onnxruntime() -> None:
    m = ortlab.examples.load("mlp")
    half = ortlab.to_fp16(m)
    r = ortlab.diverge(m, half, progress=False, threshold=1e-2)
    feeds = m.example_inputs(seed=0)
    names = [t.tensor for t in r.tensors]
    assert names, "fp16 keeps the tensor names"
    ref = exposed(m.path, names, "all", feeds)
    got = exposed(Path(half.path), names, "all", feeds)
    for t, x, y in zip(r.tensors, ref, got, strict=True):
        assert t.cosine == pytest.approx(_cosine(x, y), abs=1e-7), t.tensor
    assert max(1 - t.cosine for t in r.tensors) < 1e-3  # fp16 drifts, it does not break


def test_sessions_that_agree_report_nothing() -> None:
    r = ortlab.diverge(ortlab.examples.load("mlp"), {"intra_op_threads": 1}, progress=False)
    assert r.first is None
    assert any("agree within the threshold" in n for n in r.notes)
    with pytest.raises(OptionError, match="No divergence"):
        r.save_repro("unused-folder")
    assert not Path("unused-folder").exists()


def test_the_relative_metric_reports_only_what_diverges(
    planted: tuple[Path, Path, Any],
) -> None:
    """metric='relative' reads the final outputs as run by their relative error norm: where
    they agree (optimizations on and off) nothing is reported; where a node was planted, it
    is found. Before, the relative metric always went on to search, and said "no tensor
    passes the threshold ... yet the outputs as run do" of outputs that agreed."""
    m = ortlab.examples.load("conv_bn_relu")
    r = ortlab.diverge(m, {"level": "disabled"}, metric="relative", progress=False)
    assert r.first is None
    assert any("agree within the threshold" in n for n in r.notes), r.notes
    assert not any("yet the outputs as run do" in n for n in r.notes), r.notes
    feeds = m.example_inputs(seed=0)
    out = m.outputs[0].name
    x, y = (exposed(m.path, [out], level, feeds)[0] for level in ("all", "disabled"))
    d, ref = (np.asarray(y, np.float64) - x).ravel(), np.asarray(x, np.float64).ravel()
    mine = float(np.sqrt(d @ d) / np.sqrt(ref @ ref))
    assert r.finals[0].plain_error("relative") == pytest.approx(mine, rel=1e-3, abs=1e-9)
    assert mine < r.threshold
    a, b, _ = planted
    found = ortlab.diverge(a, b, metric="relative", progress=False)
    assert found.first is not None and found.first.node == f"n{PLANT}"


def test_bad_requests_are_refused_before_any_work() -> None:
    with pytest.raises(OptionError, match="'cosine', 'max_abs', 'relative'"):
        ortlab.diverge(ortlab.examples.load("mlp"), {"level": "disabled"}, metric="psnr")
    with pytest.raises(ortlab.SessionConfigError):
        ortlab.diverge(ortlab.examples.load("mlp"), {"level": "fastest"}, progress=False)


def test_the_shell_verb(planted: tuple[Path, Path, Any], tmp_path: Path, capsys: Any) -> None:
    a, b, _ = planted
    code = main(["diverge", str(a), "--against", str(b), "--repro", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert code == 0
    assert f"first divergence is node 'n{PLANT}'" in out and "repro written" in out
    assert (tmp_path / "r" / "repro.py").exists()
    code = main(["diverge", "mlp", "--against", "level=disabled", "--json"])
    assert code == 0 and '"metric": "cosine"' in capsys.readouterr().out


@pytest.mark.openvino
def test_a_real_ep_pair_runs_end_to_end() -> None:
    import onnxruntime as ort

    if "OpenVINOExecutionProvider" not in ort.get_available_providers():
        pytest.fail("the openvino tests must run in the .venv-openvino environment")
    r = ortlab.diverge(
        ortlab.examples.load("mlp"), {"providers": ["openvino", "cpu"]}, progress=False
    )
    assert r.tensors and all(0.99 < t.cosine <= 1.0 + 1e-9 for t in r.tensors)
    assert "openvino" in r.other.lower()


@pytest.mark.slow
def test_a_divergence_that_exposure_hides_is_found_by_bisection(tmp_path: Path) -> None:
    """The heisenbug: the QDQ chain at level all against disabled. Exposing every tensor keeps
    ORT from fusing (MatMul+Add into Gemm, requantized), so no exposed tensor's node diverges
    alone, while the outputs as run do. The bisection exposes one tensor at a time and names
    the earliest that passes the threshold so; its region, grown back, reproduces alone; a
    hand-written loop over plain onnxruntime agrees (that tensor exposed alone diverges, the
    one before it does not); the repro exits 1; the sides built the region differently."""
    a = qdq_chain(tmp_path / "a.onnx")
    r = ortlab.diverge(a, {"level": "disabled"}, progress=False)
    assert any("exposing the intermediate tensors changed" in n for n in r.notes)
    assert r.first is not None and r.first.found_by == "bisect", r.notes
    assert r.probes and any(p.tensor == r.first.tensor for p in r.probes)
    assert r.first.kernels[0] != r.first.kernels[1], r.first.kernels  # a fusion on one side
    order = [t.tensor for t in r.tensors]
    k = order.index(r.first.tensor)
    feeds = {"x": _feeds(r)}
    for tensor, past in ((order[k], True), *([(order[k - 1], False)] if k else [])):
        x, y = (exposed(a, [tensor], level, feeds)[0] for level in ("all", "disabled"))
        assert (1 - _cosine(x, y) > r.threshold) is past, tensor
    assert "found by bisection" in r.to_text()
    script = r.save_repro(tmp_path / "repro")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    assert run.returncode == 1, run.stdout + run.stderr


@pytest.mark.openvino
def test_a_planted_qdq_scale_under_openvino(tmp_path: Path) -> None:
    """The planted QDQ scale with both sides on the real OpenVINO EP: the same first node,
    its region run on OpenVINO on each side (compiled: ORT lists no kernels)."""
    import onnxruntime as ort

    if "OpenVINOExecutionProvider" not in ort.get_available_providers():
        pytest.fail("the openvino tests must run in the .venv-openvino environment")
    a, b = qdq_chain(tmp_path / "a.onnx"), qdq_chain(tmp_path / "b.onnx", plant=QDQ_PLANT)
    r = ortlab.diverge(a, b, {"providers": ["openvino", "cpu"]}, progress=False)
    assert r.first is not None and r.first.node == f"dq{QDQ_PLANT}", r.notes
    assert r.first.providers == ("OpenVINOExecutionProvider", "OpenVINOExecutionProvider")


def test_the_graph_colours_by_the_error_and_selects_the_first(
    planted: tuple[Path, Path, Any],
) -> None:
    """One scale of per-tensor error in the graph (SQNR, as quantization's): a node that adds
    no error is at the top of it, the planted one far below, and it is the one highlighted."""
    a, _, r = planted
    from ortlab.analysis.graph.data import graph_data

    g = ortlab.graph(str(a), error=r)
    assert g.color_by == "quant_error" and g.highlighted == [f"n{PLANT}"]
    sqnr = {n.name: n.sqnr_db for n in graph_data(str(a), error=r).nodes}
    assert sqnr[f"n{PLANT - 1}"] == 120.0
    row = next(t for t in r.tensors if t.index == PLANT)
    assert sqnr[f"n{PLANT}"] == pytest.approx(-20 * np.log10(row.relative))
    data = graph_data(str(a), error=r)  # a collapsed block shows its worst node's error
    assert data.groups and all(
        g.sqnr_db
        == min(n.sqnr_db for n in data.nodes if n.group == g.id or n.group.startswith(g.id + "/"))
        for g in data.groups
    )
    planted_group = next(n.group for n in data.nodes if n.name == f"n{PLANT}")
    assert min(g.sqnr_db for g in data.groups if planted_group.startswith(g.id)) < 0


def test_the_report_carries_it(planted: tuple[Path, Path, Any], tmp_path: Path) -> None:
    a, _, r = planted
    out = ortlab.report(str(a), path=tmp_path / "r.html", extra=[r])
    page = Path(out).read_text()
    assert "Where the numbers change: the first divergent node" in page
    assert f"node &#x27;n{PLANT}&#x27;" in page or f"node 'n{PLANT}'" in page


def test_the_grid_says_which_cells_diverge(planted: tuple[Path, Path, Any]) -> None:
    """The EP x level grid, run: an edited model diverges in every cell (the model itself);
    two configs of one model that agree diverge in none. Its verdict, on hand-made grids: a
    fusion (level all only), an EP's kernels (one EP only), one cell."""
    from ortlab.analysis.diverge.matrix import MatrixCell, matrix_verdict

    a, b, _ = planted
    r = ortlab.diverge(a, b, matrix=True, progress=False)
    assert [(c.providers, c.level) for c in r.matrix] == [("CPU", "disabled"), ("CPU", "all")]
    assert all(c.diverges for c in r.matrix) and "other model itself" in r.matrix_verdict
    assert "EP x level grid" in r.to_text()
    same = ortlab.diverge(
        ortlab.examples.load("mlp"), {"level": "disabled"}, matrix=True, progress=False
    )
    assert not any(c.diverges for c in same.matrix)
    assert same.matrix_verdict.startswith("no cell")

    def cells(*bad: tuple[str, str]) -> list[MatrixCell]:
        return [
            MatrixCell(ep, level, 0.5 if (ep, level) in bad else 1.0, 0.0, (ep, level) in bad)
            for ep in ("CPU", "OpenVINO")
            for level in ("disabled", "all")
        ]

    assert "a fusion" in matrix_verdict(cells(("CPU", "all"), ("OpenVINO", "all")))
    assert "OpenVINO diverges, at every level" in matrix_verdict(
        cells(("OpenVINO", "disabled"), ("OpenVINO", "all"))
    )
    assert "only CPU at level all" in matrix_verdict(cells(("CPU", "all")))
