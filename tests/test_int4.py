"""Weight-only int4 and the bundled decoder with a key/value cache: the decoder decodes as a
full recompute would, int4 packs exactly the MatMuls that have constant weights (counted
here from the model), and the variant is scored and timed like any other."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import ortlab
from ortlab.cli import main

HEADS, HEAD_DIM, LAYERS = 4, 64, 2


def _cache(past: int) -> dict[str, np.ndarray]:
    return {
        f"past_key_values.{i}.{kv}": np.zeros((1, HEADS, past, HEAD_DIM), np.float32)
        for i in range(LAYERS)
        for kv in ("key", "value")
    }


def test_decoder_decodes_like_a_full_recompute() -> None:
    m = ortlab.examples.load("decoder_tiny")
    s = ort.InferenceSession(str(m.path), providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    prompt = np.array([[3, 14, 15, 92, 65]], np.int64)
    out = dict(zip(names, s.run(None, {"input_ids": prompt, **_cache(0)}), strict=True))
    logits = []
    for token in (35, 89):  # one token at a time, the cache growing by one per step
        cache = {
            f"past_key_values.{i}.{kv}": out[f"present.{i}.{kv}"]
            for i in range(LAYERS)
            for kv in ("key", "value")
        }
        out = dict(
            zip(names, s.run(None, {"input_ids": np.array([[token]]), **cache}), strict=True)
        )
        logits.append(out["logits"][0, -1])
    assert out["present.0.key"].shape[2] == prompt.shape[1] + 2
    full_ids = np.array([[3, 14, 15, 92, 65, 35, 89]], np.int64)
    full = dict(zip(names, s.run(None, {"input_ids": full_ids, **_cache(0)}), strict=True))
    np.testing.assert_allclose(logits[-1], full["logits"][0, -1], atol=1e-4)
    np.testing.assert_allclose(logits[0], full["logits"][0, -2], atol=1e-4)


def test_int4_packs_every_constant_matmul_and_stays_close() -> None:
    m = ortlab.examples.load("decoder_tiny")
    weights = {t.name for t in m.proto.graph.initializer}
    matmuls = [n for n in m.proto.graph.node if n.op_type == "MatMul" and n.input[1] in weights]
    q = ortlab.quantize(m, mode="int4", block_size=32)
    packed = [n for n in q.proto.graph.node if n.op_type == "MatMulNBits"]
    assert len(packed) == len(matmuls) == 13  # q k v o up down per layer, and the head
    assert all({a.name: a.i for a in n.attribute}["block_size"] == 32 for n in packed)
    assert q.path.stat().st_size < 0.4 * m.path.stat().st_size
    decode = {"input_ids": np.array([[7]], np.int64), **_cache(16)}  # one decode step
    cmp = ortlab.compare(m, [q], feeds=decode, rounds=6, runs=3, progress=False)
    row = cmp.to_pandas().set_index("variant").loc[q.variant.label]
    assert row["cosine"] > 0.99 and row["file_mb"] < 5


def test_int4_needs_matmul_weights_and_says_so() -> None:
    with pytest.raises(ortlab.QuantizationError, match="no MatMul with a constant weight"):
        ortlab.quantize(ortlab.examples.load("nan_guard_cnn"), mode="int4")


def test_cli_quantize_int4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = ortlab.examples.path("decoder_tiny")
    out = tmp_path / "q4.onnx"
    code = main(
        ["quantize", str(src), "--mode", "int4", "--block-size", "64", "-o", str(out), "--json"]
    )
    assert code in (0, None)
    doc = json.loads(capsys.readouterr().out)
    assert doc["variant"] == "int4 weight-only b64" and out.exists()
