"""diverge across precisions (issue 62 item 1): a node checked alone on the other side is fed
the reference's values cast to the type that side computes in (an fp16 model's region reads
float16), so fp32 against fp16 and against int8 runs where plain onnxruntime runs both; the
repro casts the same way; nothing is left in ortlab's cache, and no cache path reaches a
message."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlab
from ortlab.core import cache
from ortlab.core.errors import OptionError

W = 0.75


def _pair(folder: Path) -> tuple[Path, Path]:
    """x -> Relu 'a' -> Mul(w) 'b' -> Tanh 'y' in float32, and the same graph computed in
    float16 (x cast in, y cast out, the tensor names kept), with the MatMul's weight planted
    (transposed: cosine does not see a scale)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 8)).astype(np.float32) * W

    def model(dtype: int, weight: np.ndarray, path: Path) -> Path:
        np_type = helper.tensor_dtype_to_np_dtype(dtype)
        nodes = []
        src = "x"
        if dtype != TensorProto.FLOAT:
            nodes.append(helper.make_node("Cast", ["x"], ["xh"], "cast_in", to=dtype))
            src = "xh"
        nodes += [
            helper.make_node("Relu", [src], ["a"], "relu"),
            helper.make_node("MatMul", ["a", "w"], ["b"], "matmul"),
            helper.make_node("Tanh", ["b"], ["t" if dtype != TensorProto.FLOAT else "y"], "tanh"),
        ]
        if dtype != TensorProto.FLOAT:
            nodes.append(helper.make_node("Cast", ["t"], ["y"], "cast_out", to=TensorProto.FLOAT))
        g = helper.make_graph(
            nodes,
            "pair",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
            [numpy_helper.from_array(weight.astype(np_type), "w")],
        )
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, str(path))
        return path

    return (
        model(TensorProto.FLOAT, w, folder / "fp32.onnx"),
        model(TensorProto.FLOAT16, w.T, folder / "fp16.onnx"),
    )


def _leftovers() -> list[str]:
    root = cache.cache_dir()
    return sorted(
        str(p.relative_to(root))
        for sub in ("repro", "tmp")
        if (root / sub).exists()
        for p in (root / sub).rglob("*")
        if p.is_file() and ("node-inputs" in p.name or "alone-" in str(p))
    )


def test_a_planted_fp16_node_is_found_alone_and_its_repro_casts(tmp_path: Path) -> None:
    """The fp16 side's MatMul reads float16 'a': run alone on the reference's float32 'a' it
    was a model ORT refuses (the node's weight is float16); cast, it is the first divergence,
    and the repro reproduces in plain onnxruntime."""
    a, b = _pair(tmp_path)
    r = ortlab.diverge(a, b, progress=False)
    assert r.first is not None, r.notes
    assert (r.first.node, r.first.op_type, r.first.tensor) == ("matmul", "MatMul", "b")
    assert all(r.error(t) < r.threshold for t in r.tensors if t.index < r.first.index)
    # the node alone, by hand: the reference's 'a' cast to float16 into the fp16 MatMul
    x = ortlab.load(a).example_inputs(seed=0)["x"]
    rel = np.maximum(x, 0)
    w = numpy_helper.to_array(onnx.load(str(b)).graph.initializer[0])
    mine = rel @ numpy_helper.to_array(onnx.load(str(a)).graph.initializer[0])
    theirs = (rel.astype(np.float16) @ w).astype(np.float64).ravel()
    cos = float(mine.ravel() @ theirs) / float(np.linalg.norm(mine) * np.linalg.norm(theirs))
    assert 1 - cos == pytest.approx(r.first.introduced, abs=1e-6)
    assert _leftovers() == []
    script = r.save_repro(tmp_path / "repro")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    other = ort.InferenceSession(str(script.parent / "other.onnx"))
    assert [i.type for i in other.get_inputs()] == ["tensor(float16)"]
    assert np.load(script.parent / "inputs.npz")["a"].dtype == np.float32  # the reference's


def test_a_result_read_back_refuses_a_repro_it_cannot_write(tmp_path: Path) -> None:
    a, b = _pair(tmp_path)
    r = ortlab.diverge(a, b, progress=False)
    assert "repro_inputs" not in r.to_json()
    back = ortlab.DivergenceResult.from_json(r.to_json())
    with pytest.raises(OptionError, match="run ortlab.diverge again"):
        back.save_repro(tmp_path / "nothing")
    assert not (tmp_path / "nothing").exists()


def test_int8_against_fp32_runs() -> None:
    m = ortlab.examples.load("mlp")
    q = ortlab.quantize(m, mode="static")  # QDQ int8
    r = ortlab.diverge(m, q, progress=False)
    plain = [
        ort.InferenceSession(str(p)).run(None, m.example_inputs(seed=0))[0]
        for p in (m.path, q.path)
    ]
    x, y = (np.asarray(v, np.float64).ravel() for v in plain)
    as_run = next(f for f in r.finals)
    assert as_run.plain_cosine == pytest.approx(
        float(x @ y) / np.linalg.norm(x) / np.linalg.norm(y)
    )
    assert _leftovers() == []


def test_no_cache_path_in_a_region_ort_refuses() -> None:
    """A region ORT cannot load is named as the region, not by the file ortlab wrote."""
    from ortlab.engine.tasks_diverge import _built

    g = helper.make_graph(
        [helper.make_node("Add", ["p", "q"], ["s"], "add")],
        "bad",
        [
            helper.make_tensor_value_info("p", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("q", TensorProto.FLOAT16, [2]),
        ],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with pytest.raises(ortlab.SessionCreationError) as err:
        _built(m, None, "s")
    text = str(err.value)
    assert "the region of 's' alone" in text
    assert str(cache.cache_dir()) not in text and "node.onnx" not in text
    assert "float16" in text  # ORT's own reason kept


@pytest.mark.slow
def test_resnet50_against_its_fp16_conversion() -> None:
    """The README's form: on the old code the node checked alone was a model ORT refused
    (BatchNormalization bound to float and float16). The final outputs' error as run equals
    plain onnxruntime's on the two files."""
    m = ortlab.examples.load("resnet50")
    half = ortlab.to_fp16(m)
    r = ortlab.diverge(m, half, progress=False)
    feeds = m.example_inputs(seed=0)
    plain = [ort.InferenceSession(str(p)).run(None, feeds)[0] for p in (m.path, half.path)]
    x, y = (np.asarray(v, np.float64).ravel() for v in plain)
    as_run = r.finals[0]
    assert as_run.plain_cosine == pytest.approx(
        float(x @ y) / np.linalg.norm(x) / np.linalg.norm(y)
    )
    assert r.tensors and as_run.plain_cosine > 0.99  # fp16 drifts, it does not break
    assert _leftovers() == []
    assert not any(os.sep + "tmp" + os.sep in n for n in r.notes)
