"""An fp16 conversion of a bundled decoder on the CPU (issue 60, item 5): its weights are said
to be fp16, read from the initializers (the conversion keeps fp32 inputs and outputs, so the
cache is fp32), and its greedy tokens equal a bare onnxruntime loop's on the same file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import ortlab

HERE = Path(ortlab.__file__).parent / "decoders"
REFERENCE = json.loads((HERE / "reference.json").read_text())
PROMPT = np.asarray([REFERENCE["prompt"]], dtype=np.int64)


def _bare_greedy(path: Path, d: ortlab.DecoderInfo, new: int) -> list[int]:
    """Plain onnxruntime, present -> past, from an empty cache."""
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    past = {n: np.zeros((1, d.kv_heads, 0, d.head_size), np.float32) for n in d.past_inputs}
    ids, length, tokens = PROMPT, 0, []
    for _ in range(new):
        mask = np.ones((1, length + ids.shape[1]), np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, **past}
        out = dict(zip(names, sess.run(None, feeds), strict=True))
        tokens.append(int(out["logits"][0, -1].argmax()))
        length += ids.shape[1]
        past = {p.past_key: out[p.present_key] for p in d.pairs} | {
            p.past_value: out[p.present_value] for p in d.pairs
        }
        ids = np.array([[tokens[-1]]], np.int64)
    return tokens


def test_an_fp16_decoder_says_fp16_and_generates_the_bare_loops_tokens() -> None:
    fp32 = ortlab.examples.load("tiny_llama_fp32")
    half = ortlab.load(ortlab.to_fp16(fp32))
    d = half.decoder
    assert d is not None and fp32.decoder is not None
    proto = onnx.load(str(half.path), load_external_data=False)
    kinds = {onnx.helper.tensor_dtype_to_np_dtype(t.data_type) for t in proto.graph.initializer}
    assert np.dtype(np.float16) in kinds  # the conversion did make fp16 weights
    assert d.weight_format.kind == "fp16" and d.weights == "fp16 weights"
    assert d.kv_dtype == "float" and fp32.decoder.weights == "fp32 weights"
    n = REFERENCE["new_tokens"]
    g = ortlab.generate(half, feeds={"input_ids": PROMPT}, new_tokens=n, runs=1, progress=False)
    assert g.tokens == _bare_greedy(half.path, d, n)
    assert "fp16 weights" in g.to_text()
    # the CPU EP has no fp16 MatMul here: ORT runs them in float between casts it inserts,
    # which the profile shows by name, and the generation says so with their share
    split = g.by_phase()
    casts = split[split.node.str.startswith("InsertedPrecisionFreeCast_")]
    matmuls = split[split.op_type == "MatMul"]
    note = next((n for n in g.notes if "ORT inserted" in n), "")
    if casts.empty:  # an EP with fp16 kernels: the MatMuls computed in fp16
        assert not note and set(g.weights.dtype) == {"fp16"}
    else:
        decode = casts[casts.phase == "decode"].share.sum()
        assert f"{decode:.0%} of the decode" in note
        assert not matmuls.empty and set(g.weights.dtype) == {"fp32"}
