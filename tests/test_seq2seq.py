"""Encoder-decoders (issue 46 item 2, a first part): optimum's tiny Whisper (made by
scripts/make_decoders.py, stage seq2seq: encoder_model.onnx + decoder_model_merged.onnx) is known
for what it is — its self-attention cache told from the fixed cross-attention one by their dims,
its encoder and frames read from the file beside — and every decoder step ortlab invents runs
in plain onnxruntime. The folder's reference (optimum's own ORTModelForSpeechSeq2Seq.generate)
equals a plain onnxruntime loop written here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

import ortlab
from ortlab.core.errors import FeedError

HERE = Path(ortlab.__file__).parent / "decoders" / "optimum_whisper"
REFERENCE = json.loads((HERE / "seq2seq.json").read_text())


def test_the_caches_are_told_apart_by_their_dims() -> None:
    m = ortlab.load(HERE)
    d = m.decoder
    assert d is not None and m.path.name == "decoder_model_merged.onnx"
    # independent of names: which present is longer than its past, read from the file here
    s = ort.InferenceSession(str(m.path), providers=["CPUExecutionProvider"])
    shapes = {v.name: v.shape for v in [*s.get_inputs(), *s.get_outputs()]}
    for p in d.pairs:
        assert shapes[p.present_key][2] != shapes[p.past_key][2]
    for p in d.cross_pairs:
        assert shapes[p.present_key][2] == shapes[p.past_key][2]
    assert len(d.pairs) == len(d.cross_pairs) == 2
    assert {p.past_key for p in d.pairs} == {f"past_key_values.{i}.decoder.key" for i in (0, 1)}
    config = REFERENCE["whisper_config"]
    assert (d.heads, d.kv_heads, d.head_size) == (4, 4, 16)
    assert d.max_length == config["max_target_positions"] and d.vocab == config["vocab_size"]
    assert (d.encoder, d.encoder_length, d.encoder_states) == (
        "encoder_model.onnx",
        config["max_source_positions"],
        "encoder_hidden_states",
    )
    assert d.line().startswith("encoder-decoder (encoder_model.onnx beside): decoder with KV")
    assert "cross-attention cache of the encoder's 1500 frames" in m.summary.decoder
    # the self-attention cache alone grows by the formula
    assert d.kv_bytes_per_token == 2 * 2 * 4 * 16 * 4


@pytest.mark.parametrize(
    "dims", [None, {"prompt": 1, "past": 0}, {"prompt": 4, "past": 0}, {"prompt": 1, "past": 40}]
)
def test_plain_onnxruntime_runs_every_decoder_step_ortlab_invents(dims: Any) -> None:
    """The first step (no past: both caches empty, the branch without a past) and decode steps
    (the cross cache at the encoder's frames): plain onnxruntime runs them, the self cache's
    present is past + new long and the cross cache's the encoder's frames."""
    m = ortlab.load(HERE)
    d = m.decoder
    assert d is not None
    f = m.example_inputs(dims=dims)
    past, prompt = f.dims["past"].value, f.dims["prompt"].value
    assert f[d.encoder_states].shape == (1, 1500, 64)
    for p in d.cross_pairs:
        assert f[p.past_key].shape[2] == (0 if past == 0 else 1500)
    s = ort.InferenceSession(str(m.path), providers=["CPUExecutionProvider"])
    outs = dict(zip([o.name for o in s.get_outputs()], s.run(None, dict(f)), strict=True))
    for p in d.pairs:
        assert outs[p.present_key].shape == (1, 4, past + prompt, 16)
    if past == 0:
        for p in d.cross_pairs:
            assert outs[p.present_key].shape == (1, 4, 1500, 16)
    b = ortlab.benchmark(m, dims=dims, runs=2, warmup=1, progress=False)
    assert b.stats.count == 2


def test_the_folders_reference_is_a_plain_onnxruntime_greedy_loop() -> None:
    """The encoder once, then the decoder token by token: the self cache from each step's
    present, the cross cache from the first step's (the with-past branch returns a dummy in
    its place); the tokens equal optimum's generate, recorded when the folder was made."""
    features = np.random.default_rng(0).standard_normal((1, 80, 3000)).astype(np.float32)
    enc = ort.InferenceSession(str(HERE / "encoder_model.onnx"), providers=["CPUExecutionProvider"])
    dec = ort.InferenceSession(
        str(HERE / "decoder_model_merged.onnx"), providers=["CPUExecutionProvider"]
    )
    states = enc.run(None, {"input_features": features})[0]
    names = [o.name for o in dec.get_outputs()]
    past = {
        i.name: np.zeros((1, 4, 0, 16), np.float32)
        for i in dec.get_inputs()
        if i.name.startswith("past_key_values.")
    }
    ids, tokens = list(REFERENCE["decoder_start"]), []
    for step in range(REFERENCE["new_tokens"]):
        feeds = {
            "input_ids": np.asarray([ids[-1:] if step else ids], np.int64),
            "encoder_hidden_states": states,
            "use_cache_branch": np.array([step > 0]),
            **past,
        }
        outs = dict(zip(names, dec.run(None, feeds), strict=True))
        tokens.append(int(outs["logits"][0, -1].argmax()))
        ids.append(tokens[-1])
        for k, v in outs.items():
            if k != "logits" and (step == 0 or ".encoder." not in k):
                past[k.replace("present", "past_key_values")] = v
    assert tokens == REFERENCE["optimum_generate"] == REFERENCE["ort_greedy_tokens"]


def test_verbs_that_run_a_decoder_alone_say_what_measures_an_encoder_decoder() -> None:
    m = ortlab.load(HERE)
    for verb in (ortlab.generate, ortlab.llm_bench):
        with pytest.raises(FeedError, match=r"encoder-decoder .*dims=\{'prompt': 1"):
            verb(m, progress=False)
    with pytest.raises(FeedError, match="encoder-decoder"):
        ortlab.kl_divergence(m, m, progress=False)
