"""``ortlab.cost``: FLOPs and bytes per node, checked against independent sources — counts by hand
on generated models, ORT's own record of each node's input and output bytes, and onnx-tool's MAC
count (its own shape inference, no ORT) on real exports."""

from __future__ import annotations

import contextlib
import io
import json
import math
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlab
from ortlab.analysis.limits.formulas import node_cost
from ortlab.analysis.limits.opkinds import ALIASING
from ortlab.cli import main
from tests import corpus
from tests.models import F, make, vi

# ---------------------------------------------------------------- formulas, by hand


def test_conv_counts_two_flops_per_mac_and_one_per_bias_add() -> None:
    # depthwise 3x3 over 16 channels (group=16: W is [16, 1, 3, 3]) with a bias
    x, w, b = ("float", (1, 16, 8, 8)), ("float", (16, 1, 3, 3)), ("float", (16,))
    y = ("float", (1, 16, 8, 8))
    c = node_cost("Conv", [x, w, b], [y])
    assert c.flops == 2 * (16 * 8 * 8) * 9 + 16 * 8 * 8
    assert c.bytes_read == 4 * (16 * 64 + 16 * 9 + 16) and c.bytes_written == 4 * 16 * 64
    assert (c.kind, c.dtype, c.note) == ("compute", "fp32", "")
    # a transposed conv does its MACs per input element: 2x upsampling, 4 -> 2 channels, 2x2
    t = node_cost(
        "ConvTranspose",
        [("float", (1, 4, 5, 5)), ("float", (4, 2, 2, 2))],
        [("float", (1, 2, 10, 10))],
    )
    assert t.flops == 2 * (4 * 25) * (2 * 2 * 2)


def test_matmul_gemm_and_int8_kernels() -> None:
    a, b, y = ("float", (2, 7, 16)), ("float", (16, 5)), ("float", (2, 7, 5))
    assert node_cost("MatMul", [a, b], [y]).flops == 2 * 2 * 7 * 5 * 16
    # Gemm with transA: A is [K, M]
    g = node_cost(
        "Gemm",
        [("float", (16, 3)), ("float", (16, 4)), ("float", (4,))],
        [("float", (3, 4))],
        {"transA": 1, "transB": 0},
    )
    assert g.flops == 2 * 3 * 4 * 16 + 3 * 4
    # a pre-packed weight ORT does not list: K still comes from A
    q = node_cost(
        "MatMulInteger",
        [("uint8", (20, 1024)), None, ("uint8", ()), ("uint8", ())],
        [("int32", (20, 8210))],
    )
    assert q.flops == 2 * 20 * 8210 * 1024 and q.dtype == "int8"
    half = node_cost("MatMul", [("float16", (1, 4)), ("float16", (4, 2))], [("float16", (1, 2))])
    assert half.dtype == "fp16" and half.bytes == 2 * (4 + 8 + 2)


def test_attention_lstm_einsum_pool_and_unknown() -> None:
    # MultiHeadAttention: B=1, S=10 queries, 12 keys, hidden 64 over 4 heads
    q, k = ("float", (1, 10, 64)), ("float", (1, 12, 64))
    mha = node_cost("MultiHeadAttention", [q, k, k], [q], {"num_heads": 4})
    assert mha.flops == 4 * 10 * 12 * 64 + 5 * 4 * 10 * 12
    # LSTM: 5 steps, batch 2, input 3, hidden 4 (gates 16), one direction
    x, w, r = ("float", (5, 2, 3)), ("float", (1, 16, 3)), ("float", (1, 16, 4))
    lstm = node_cost("LSTM", [x, w, r], [("float", (5, 1, 2, 4))])
    assert lstm.flops == 5 * 2 * (2 * (48 + 64) + 10 * 16)
    e = node_cost(
        "Einsum",
        [("float", (2, 3, 4)), ("float", (2, 4, 5))],
        [("float", (2, 3, 5))],
        {"equation": "bij,bjk->bik"},
    )
    assert e.flops == 2 * 2 * 3 * 4 * 5
    p = node_cost(
        "MaxPool", [("float", (1, 8, 16, 16))], [("float", (1, 8, 8, 8))], {"kernel_shape": (3, 3)}
    )
    assert p.flops == 8 * 64 * 9 and p.kind == "pooling"
    s = node_cost("Shape", [("float", (1, 3, 224, 224))], [("int64", (4,))])
    assert (s.flops, s.bytes_read, s.bytes_written) == (0, 0, 32)  # reads no data
    u = node_cost(
        "TreeEnsembleClassifier", [("float", (1, 4))], [("int64", (1,))], domain="ai.onnx.ml"
    )
    assert math.isnan(u.flops) and u.kind == "unknown"
    assert u.note == "no formula for op ai.onnx.ml:TreeEnsembleClassifier" and u.bytes == 24
    missing = node_cost("Conv", [("float", (1, 3, 8, 8)), None], [("float", (1, 4, 8, 8))])
    assert math.isnan(missing.flops) and "unknown" in missing.note


# ---------------------------------------------------------------- ortlab.cost on a session


def _mlp(path: Path) -> Path:
    """x[4, 32] -> MatMul W1[32, 64] -> Add b1 -> Relu -> Gemm W2[64, 10] + b2 -> Softmax."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((32, 64)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b1"),
        numpy_helper.from_array(rng.standard_normal((64, 10)).astype(np.float32), "w2"),
        numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "b2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], "mm"),
        helper.make_node("Add", ["h", "b1"], ["hb"], "bias"),
        helper.make_node("Relu", ["hb"], ["a"], "relu"),
        helper.make_node("Gemm", ["a", "w2", "b2"], ["z"], "gemm"),
        helper.make_node("Softmax", ["z"], ["y"], "softmax", axis=-1),
    ]
    onnx.save(make(nodes, [vi("x", F, ["batch", 32])], [vi("y", F, ["batch", 10])], inits), path)
    return path


def test_mlp_counted_by_hand_and_bytes_equal_orts_record(tmp_path: Path) -> None:
    c = ortlab.cost(
        _mlp(tmp_path / "mlp.onnx"), {"level": "disabled"}, dims={"batch": 4}, progress=False
    )
    rows = {r.node: r for r in c.rows}
    assert set(rows) == {"mm", "bias", "relu", "gemm", "softmax"}
    expect = {
        "mm": 2 * 4 * 64 * 32,
        "bias": 4 * 64,
        "relu": 4 * 64,
        "gemm": 2 * 4 * 10 * 64 + 4 * 10,
        "softmax": 5 * 4 * 10,
    }
    assert {n: r.flops for n, r in rows.items()} == expect
    assert c.total_flops == sum(expect.values())
    # weights included: the MatMul reads x and W1 and writes h
    assert rows["mm"].bytes == 4 * (4 * 32 + 32 * 64 + 4 * 64)
    # ORT's profile records each node's input and output sizes itself (all but a weight a
    # kernel pre-packed and released: the MatMul's W1)
    listed = {r.node: r for r in c.rows if r.ort_bytes >= 0}
    assert {"bias", "relu", "softmax"} <= set(listed)
    for r in listed.values():
        assert r.ort_bytes == r.bytes, r
    frame = c.to_pandas()
    assert list(frame.columns[:5]) == ["node", "op_type", "flops", "bytes", "intensity"]
    assert list(frame["node"]) == ["mm", "gemm", "bias", "relu", "softmax"]  # most FLOPs first
    assert frame.set_index("node").loc["mm", "intensity"] == pytest.approx(
        expect["mm"] / rows["mm"].bytes
    )
    back = ortlab.CostResult.from_json(c.to_json())
    assert back.rows == c.rows and back.total_flops == c.total_flops
    assert "computed from shapes" in c.to_text() and "not measured" in c._repr_html_()
    assert "batch=4 (given)" in c.feeds


def test_under_a_config_rows_are_the_kernels_ort_runs(tmp_path: Path) -> None:
    """At level 'all' ORT fuses MatMul+Add into a Gemm-like kernel: the rows are its kernels
    (their names from ORT's own profile), and the matmul work is the same."""
    path = _mlp(tmp_path / "mlp.onnx")
    own = ortlab.cost(path, {"level": "disabled"}, dims={"batch": 4}, progress=False)
    fused = ortlab.cost(path, dims={"batch": 4}, progress=False)  # as every verb: level all
    prof = ortlab.profile(
        path, {"level": "all"}, dims={"batch": 4}, runs=1, warmup=0, progress=False
    )
    assert {r.node for r in fused.rows} == set(prof.data.node)
    assert len(fused.rows) < len(own.rows)
    compute = [r for r in fused.rows if r.kind == "compute"]
    assert sum(r.flops for r in compute) >= 2 * 4 * 64 * 32 + 2 * 4 * 10 * 64


def test_loop_body_counts_each_iteration(tmp_path: Path) -> None:
    """A Loop body's Add runs once per iteration: calls per run = trip count."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], "keep"),
            helper.make_node("Add", ["v_in", "one_b"], ["v_out"], "step"),
        ],
        "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("v_in", F, [8])],
        [vi("cond_out", TensorProto.BOOL, []), vi("v_out", F, [8])],
        initializer=[numpy_helper.from_array(np.ones(8, np.float32), "one_b")],
    )
    inits = [
        numpy_helper.from_array(np.array(6, np.int64), "trip"),
        numpy_helper.from_array(np.array(True), "cond"),
    ]
    loop = helper.make_node("Loop", ["trip", "cond", "x"], ["y"], name="loop", body=body)
    path = tmp_path / "loop.onnx"
    onnx.save(make([loop], [vi("x", F, [8])], [vi("y", F, [8])], inits), path)
    c = ortlab.cost(path, {"level": "disabled"}, progress=False)
    step = next(r for r in c.rows if r.node == "step")
    assert step.calls == 6 and step.flops == 6 * 8
    assert next(r for r in c.rows if r.node == "loop").kind == "control"
    assert any("Loop or Scan body" in n for n in c.notes)


def test_cli_cost(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "mlp", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "computed from shapes, not measured" in out and "Per op type" in out
    assert main(["cost", "mlp", "--json"]) == 0
    c = ortlab.CostResult.from_json(capsys.readouterr().out)
    assert c.config == ortlab.SessionConfig() and c.total_flops > 0, "the config every verb runs"
    assert json.loads(c.to_json())["ortlab"] == "CostResult"
    assert main(["cost", "mlp", "--level", "disabled", "--json"]) == 0
    own = ortlab.CostResult.from_json(capsys.readouterr().out)
    assert own.config.level == "disabled" and len(own.rows) > len(c.rows), "the model's own nodes"


def test_a_compiling_ep_is_refused_clearly(tmp_path: Path) -> None:
    path = _mlp(tmp_path / "mlp.onnx")
    with pytest.raises(ortlab.RunError, match="compiles parts of the graph"):
        ortlab.cost(
            path, dims={"batch": 1}, config={"providers": ["openvino", "cpu"]}, progress=False
        )


# ---------------------------------------------------------------- real exports


def _onnx_tool_macs(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, tuple[str, float]]:
    """Per node: op type and MACs as onnx-tool counts them (its own shape inference)."""
    import onnx_tool

    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = onnx_tool.Model(str(path), {"verbose": False})
        m.graph.shape_infer({k: np.asarray(v) for k, v in feeds.items()})
        m.graph.profile()
    out = {}
    for name, node in m.graph.nodemap.items():
        macs = node.macs[0] if isinstance(node.macs, list) else node.macs
        out[name] = (node.op_type, float(macs))
    return out


def _check_bytes_against_orts(r: ortlab.CostRow) -> None:
    """A node whose inputs ORT listed in full: our bytes are ORT's (its inputs and outputs),
    except Shape and Size (they read no data), the ops ORT runs in place (no byte moves) and
    the indexing ops, which read the indices and
    the rows they touch: at most their whole inputs, and at least their indices and output."""
    if r.ort_bytes < 0 or r.op_type in ("Shape", "Size") or r.kind == "control":
        return
    if r.op_type in ALIASING:  # ORT lists its input and output; they are one buffer
        assert r.bytes == 0, r
        return
    if r.op_type in ("Gather", "GatherElements", "GatherND", "Slice"):
        assert r.bytes_written <= r.bytes <= r.ort_bytes * r.calls + 1e-6, r
    else:
        assert r.bytes == pytest.approx(r.ort_bytes * r.calls), r


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["resnet50_legacy", "ppocrv4_rec", "minilm_l3"])
def test_conv_and_matmul_flops_equal_onnx_tools_count(name: str) -> None:
    feeds = corpus.feeds(name)
    c = ortlab.cost(corpus.path(name), {"level": "disabled"}, feeds, progress=False)
    ours = {r.node: r for r in c.rows}
    theirs = _onnx_tool_macs(corpus.path(name), feeds)
    checked = 0
    for node, (op, macs) in theirs.items():
        if op not in ("Conv", "MatMul", "Gemm"):
            continue
        row = ours[node]
        out = math.prod(int(d) for d in row.outputs.split("[")[1].rstrip("]").split(","))
        with_bias = len([x for x in row.inputs.split("], ") if x]) == 3
        # onnx-tool counts a bias add as one MAC; ortlab as one FLOP
        assert row.flops == 2 * macs - (out if with_bias else 0), (node, row, macs)
        checked += 1
    assert checked >= 10
    for r in c.rows:
        _check_bytes_against_orts(r)
    assert not math.isnan(c.total_flops) and not c.unknown


@pytest.mark.corpus
def test_resnet50_is_the_published_count() -> None:
    """ResNet-50 at 224x224 is quoted at ~4.1 GMACs (He et al. 2016: 3.8e9 multiply-adds
    without the shortcut projections' and FC's share): 2 FLOPs each."""
    c = ortlab.cost(
        corpus.path("resnet50_legacy"),
        {"level": "disabled"},
        corpus.feeds("resnet50_legacy"),
        progress=False,
    )
    conv = c.by_op_type.set_index("op_type").loc["Conv", "flops"]
    assert 2 * 4.0e9 < conv < 2 * 4.2e9


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["slovorez_fp16", "knn_zipmap", "silero_vad", "ddddocr_int8"])
def test_precisions_bodies_and_contrib_kernels(name: str) -> None:
    c = ortlab.cost(corpus.path(name), {"level": "disabled"}, corpus.feeds(name), progress=False)
    dtypes = {r.dtype for r in c.rows if r.kind == "compute"}
    if name == "slovorez_fp16":  # the CPU EP has no fp16 Conv: ORT casts around it
        assert dtypes == {"fp32"} and any(r.op_type == "Cast" and r.dtype == "fp16" for r in c.rows)
        assert any("inserted" in n and "Cast" in n for n in c.notes)
    if name == "ddddocr_int8":
        assert "int8" in dtypes and {"ConvInteger", "DynamicQuantizeLSTM"} <= {
            r.op_type for r in c.rows if r.flops > 0
        }
    if name == "knn_zipmap":  # the Scan body runs once per sample
        assert any(r.calls > 1 for r in c.rows)
    if name == "silero_vad":
        assert any(r.op_type == "LSTM" and r.flops > 0 for r in c.rows)
    for r in c.rows:
        assert not math.isnan(r.bytes), r
        _check_bytes_against_orts(r)


def test_element_sizes_have_one_table_that_agrees_with_numpy() -> None:
    """The one table of element sizes (by ORT's dtype names, as profiles write them) against
    numpy's itemsize for every type numpy has, and the sub-byte types ONNX packs."""
    from onnx import TensorProto, helper

    from ortlab.core.onnx_util import DTYPE_BYTES, dtype_name

    for t in (
        TensorProto.FLOAT,
        TensorProto.DOUBLE,
        TensorProto.FLOAT16,
        TensorProto.INT8,
        TensorProto.UINT8,
        TensorProto.INT32,
        TensorProto.INT64,
        TensorProto.BOOL,
    ):
        assert DTYPE_BYTES[dtype_name(t)] == np.dtype(helper.tensor_dtype_to_np_dtype(t)).itemsize
    assert DTYPE_BYTES["int4"] == DTYPE_BYTES["uint4"] == 0.5 and DTYPE_BYTES["bfloat16"] == 2
    assert dtype_name(TensorProto.FLOAT) == "float" and "string" not in DTYPE_BYTES


def test_an_embedding_lookup_reads_the_rows_it_gathers() -> None:
    """Gather over a 30522 x 768 table for 8 ids reads the 8 ids and the 8 rows it copies,
    counted by hand (it counted the whole 93.8 MB table before); GatherElements and Slice read
    what they touch too."""
    table, ids, rows = ("float", (30522, 768)), ("int64", (1, 8)), ("float", (1, 8, 768))
    g = node_cost("Gather", [table, ids], [rows])
    assert g.bytes_read == 8 * 8 + 8 * 768 * 4 and g.bytes_written == 8 * 768 * 4
    assert g.flops == 0 and g.kind == "data"
    s = node_cost(
        "Slice",
        [("float", (1, 4096, 64)), ("int64", (1,)), ("int64", (1,)), ("int64", (1,))],
        [("float", (1, 33, 64))],
    )
    assert s.bytes_read == 3 * 8 + 33 * 64 * 4


@pytest.mark.parametrize(("new", "past"), [(32, 0), (1, 32)], ids=["prefill", "decode"])
def test_group_query_attention_counted_by_hand(new: int, past: int) -> None:
    """A genai-style GQA (8 query heads, 2 KV heads of 64, rotary caches of 4096 positions):
    QK^T and AV are 2 x (2 x S x (P + S) x 512) FLOPs plus 5 per score and head; it reads its
    inputs, the past K/V, and the cos/sin rows of its S positions, not the whole caches."""
    heads, kv, size, max_len = 8, 2, 64, 4096
    q = ("float", (1, new, heads * size))
    k = v = ("float", (1, new, kv * size))
    past_k = past_v = ("float", (1, kv, past, size))
    seqlens, total = ("int32", (1,)), ("int32", ())
    cos = sin = ("float", (max_len, size // 2))
    out = ("float", (1, new, heads * size))
    present = ("float", (1, kv, past + new, size))
    c = node_cost(
        "GroupQueryAttention",
        [q, k, v, past_k, past_v, seqlens, total, cos, sin],
        [out, present, present],
        {"num_heads": heads, "kv_num_heads": kv},
    )
    total_len = past + new
    assert c.flops == 4 * new * total_len * heads * size + 5 * heads * new * total_len
    f32 = 4
    inputs = (new * heads * size + 2 * new * kv * size + 2 * kv * past * size) * f32 + 4 + 4
    rotary = 2 * new * (size // 2) * f32  # cos and sin rows of the S positions
    assert c.bytes_read == inputs + rotary
    assert c.bytes_written == (new * heads * size + 2 * kv * total_len * size) * f32


def test_matmul_nbits_counted_by_hand_and_set_against_its_precision() -> None:
    """int4 MatMulNBits, K=256, N=128, blocks of 32: 2·M·N·K FLOPs; it reads A, the packed
    weights (N·K·4/8 bytes), the scales; at accuracy level 4 it multiplies in int8."""
    a, out = ("float", (1, 1, 256)), ("float", (1, 1, 128))
    packed, scales = ("uint8", (128, 8, 16)), ("float", (128 * 8,))
    attrs = {"K": 256, "N": 128, "bits": 4, "block_size": 32}
    c = node_cost("MatMulNBits", [a, packed, scales], [out], attrs, "com.microsoft")
    assert c.flops == 2 * 1 * 128 * 256 and c.kind == "compute"
    assert c.bytes_read == 256 * 4 + 128 * 256 * 4 / 8 + 128 * 8 * 4 and c.dtype == "fp32"
    int8 = node_cost("MatMulNBits", [a, packed, scales], [out], {**attrs, "accuracy_level": 4})
    assert int8.dtype == "int8" and int8.flops == c.flops


def test_rotary_embedding_has_a_formula_and_reads_its_positions_rows() -> None:
    x, ids = ("float", (1, 4, 512)), ("int64", (1, 4))
    cache = ("float", (4096, 32))
    c = node_cost("RotaryEmbedding", [x, ids, cache, cache], [x], domain="com.microsoft")
    assert c.flops == 3 * 4 * 512 and c.kind == "elementwise"
    assert c.bytes_read == 4 * 512 * 4 + 4 * 8 + 2 * 4 * 32 * 4
