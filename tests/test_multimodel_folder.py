"""A folder of several models (issue 60 item 6): onnxruntime-genai's builder makes a speech
model as two files named by genai_config.json (ortlab/decoders/genai_whisper, scripts/
make_decoders.py stage multimodel): encoder.onnx computes the states and each layer's
cross-attention K/V, decoder.onnx reads them. ortlab.load(folder) loads the text decoder and
names both files with their roles; the decoder generates genai's own tokens (recorded by its
generator) and a plain onnxruntime loop's written here; the encoder, loaded as a part,
benchmarks and profiles as any model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import ortlab
from ortlab.core.errors import InvalidModelError
from ortlab.views.report import report_html

FOLDER = Path(ortlab.__file__).parent / "decoders" / "genai_whisper"
REFERENCE = json.loads((FOLDER / "multimodel.json").read_text())
CONFIG = json.loads((FOLDER / "genai_config.json").read_text())["model"]


def _features() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1, 80, 3000)).astype(np.float32)


def _plain_loop(start: list[int], n: int) -> list[int]:
    """The encoder once, then greedy decoder steps; the cross K/V wired by hand from the
    encoder's outputs to the decoder's inputs by their layer and kind."""
    enc = ort.InferenceSession(str(FOLDER / "encoder.onnx"), providers=["CPUExecutionProvider"])
    dec = ort.InferenceSession(str(FOLDER / "decoder.onnx"), providers=["CPUExecutionProvider"])
    made = dict(
        zip(
            [o.name for o in enc.get_outputs()],
            enc.run(None, {"audio_features": _features()}),
            strict=True,
        )
    )
    ins = {i.name: i for i in dec.get_inputs()}
    cross = {n: made[n.replace("past", "present")] for n in ins if "cross" in n}
    past = {n: np.zeros((1, 4, 0, 16), np.float32) for n in ins if "self" in n}
    ids, tokens = list(start), []
    names = [o.name for o in dec.get_outputs()]
    for step in range(n):
        feeds = {
            "input_ids": np.asarray([ids if step == 0 else ids[-1:]], np.int32),
            **past,
            **cross,
        }
        got = dict(zip(names, dec.run(None, feeds), strict=True))
        tokens.append(int(got["logits"][0, -1].argmax()))
        ids.append(tokens[-1])
        past = {k.replace("present", "past"): v for k, v in got.items() if k != "logits"}
    return tokens


def test_the_folder_names_each_model_and_its_role() -> None:
    m = ortlab.load(FOLDER)
    assert m.path.name == CONFIG["decoder"]["filename"]
    said = m.summary.folder
    assert said.startswith("a folder of 2 models: decoder.onnx, the text decoder (loaded); ")
    assert "encoder.onnx, the audio encoder" in said and "(part='encoder')" in said
    d = m.decoder
    assert d is not None and d.seq2seq and not d.cross_pairs
    assert (d.encoder, d.encoder_length, d.encoder_layers) == ("encoder.onnx", 1500, 2)
    # the encoder's outputs each decoder input reads: the same layer, the same kind, and the
    # same shape on both sides (read from the two files here, not from ortlab)
    enc = ort.InferenceSession(str(FOLDER / "encoder.onnx"), providers=["CPUExecutionProvider"])
    dec = ort.InferenceSession(str(FOLDER / "decoder.onnx"), providers=["CPUExecutionProvider"])
    outs = {o.name: o.shape[1:] for o in enc.get_outputs()}
    ins = {i.name: i.shape[1:] for i in dec.get_inputs()}
    assert len(d.encoder_feeds) == 2 * CONFIG["decoder"]["num_hidden_layers"]
    for made, read in d.encoder_feeds:
        assert outs[made] == ins[read] and made.split("_")[1:] == read.split("_")[1:]
    assert {p.past_key for p in d.pairs} == {"past_key_self_0", "past_key_self_1"}
    assert "computing the cross-attention K/V" in d.line()
    assert "<b>Its folder</b>: a folder of 2 models" in report_html(m)


@pytest.mark.slow
def test_the_text_decoder_generates_genais_tokens() -> None:
    m = ortlab.load(FOLDER)
    start = REFERENCE["decoder_start"]
    n = REFERENCE["new_tokens"]
    g = ortlab.generate(
        m,
        feeds={"audio_features": _features()},
        decoder_prompt=start,
        new_tokens=n,
        runs=1,
        progress=False,
    )
    tokens = np.asarray(g.tokens).ravel().tolist()
    assert tokens == REFERENCE["genai_generate"] == _plain_loop(start, n)
    assert g.encoder == "encoder" and g.encoder_ms
    phases = set(g.by_phase()["phase"])
    assert phases == {"encoder", "prefill", "decode"}
    layers = g.by_layer()
    assert set(layers[layers.phase == "encoder"]["layer"]) >= {0, 1}


@pytest.mark.slow
def test_with_no_start_ids_it_says_where_the_start_came_from() -> None:
    g = ortlab.generate(ortlab.load(FOLDER), new_tokens=3, runs=1, progress=False)
    assert "bos_token_id" in g.to_text() and "the folder names no decoder start" in g.to_text()


def test_the_encoder_benchmarks_and_profiles_as_a_part() -> None:
    e = ortlab.load(FOLDER, part="encoder")
    assert e.path == FOLDER / "encoder.onnx" and e.decoder is None
    assert "encoder.onnx, the audio encoder" in e.summary.folder and "(loaded)" in e.summary.folder
    b = ortlab.benchmark(e, runs=3, progress=False)
    assert b.stats.p50_ms > 0 and b.model == "genai_whisper.encoder"
    p = ortlab.profile(e, runs=2, progress=False)
    assert p.by_node()["share"].sum() == pytest.approx(1.0, abs=1e-6)
    assert ortlab.load(FOLDER, part="encoder.onnx").path == e.path


def test_a_part_that_is_not_there_is_refused_with_what_is() -> None:
    with pytest.raises(InvalidModelError, match=r'"decoder" \(decoder.onnx\), "encoder"'):
        ortlab.load(FOLDER, part="vision")
    with pytest.raises(InvalidModelError, match="is not a folder"):
        ortlab.load(FOLDER / "encoder.onnx", part="encoder")
    assert ortlab.load(FOLDER.parent / "genai_int4").summary.folder == ""


def _unbiased_attention(path: Path) -> Path:
    """One com.microsoft.Attention with no bias input, as genai's builder writes a layer whose
    bias is zero."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.eye(16, 48, dtype=np.float32), "w")
    g = helper.make_graph(
        [
            helper.make_node(
                "Attention", ["x", "w"], ["y"], "attn", domain="com.microsoft", num_heads=2
            )
        ],
        "unbiased",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16])],
        [w],
    )
    m = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def test_a_crash_onnxruntime_is_known_for_names_its_trigger(tmp_path: Path) -> None:
    """Plain onnxruntime's process dies on it (checked here, in a process of its own); ortlab's
    worker dies too, and the error names the node and the upstream issue."""
    import subprocess
    import sys

    from ortlab.core.errors import WorkerCrashedError

    path = _unbiased_attention(tmp_path / "unbiased.onnx")
    code = (
        "import numpy as np, onnxruntime as ort, sys; "
        "s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider']); "
        "s.run(None, {'x': np.ones((1, 8, 16), np.float32)})"
    )
    plain = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, check=False
    )
    if plain.returncode >= 0:
        pytest.skip(f"this onnxruntime runs it (exit {plain.returncode}): nothing to name")
    with pytest.raises(WorkerCrashedError, match=r"without its bias input \(node 'attn'\)"):
        ortlab.benchmark(path, runs=1, progress=False)
