"""Encoder-decoders (issue 46 item 2, a first part): optimum's tiny Whisper (made by
scripts/make_decoders.py, stage seq2seq: encoder_model.onnx + decoder_model_merged.onnx) is known
for what it is — its self-attention cache told from the fixed cross-attention one by their dims,
its encoder and frames read from the file beside — and every decoder step ortlab invents runs
in plain onnxruntime. The folder's reference (optimum's own ORTModelForSpeechSeq2Seq.generate)
equals a plain onnxruntime loop written here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

import ortlab
from ortlab.core.errors import FeedError, UnsupportedModelError

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
    with pytest.raises(FeedError, match=r"encoder-decoder .*ortlab.generate runs its encoder"):
        ortlab.llm_bench(m, progress=False)
    with pytest.raises(FeedError, match="encoder-decoder"):
        ortlab.kl_divergence(m, m, progress=False)


def unmerged_pair(folder: Path) -> Path:
    """Optimum's unmerged pair (``--no-post-process``: decoder_model.onnx for the first step,
    decoder_with_past_model.onnx after it) with the encoder and configs, in ``folder``: the two
    exported graphs the bundled merge holds as its If's branches (optimum's merge_decoders
    embeds them whole, weights moved out), each a model again with the inputs and outputs
    optimum writes (the with-past one without the dummy cross presents the merge added)."""
    import onnx
    from onnx import helper

    merged = onnx.load(str(HERE / "decoder_model_merged.onnx"))
    g = merged.graph
    (branch_of,) = [n for n in g.node if n.op_type == "If"]
    bodies = {a.name: a.g for a in branch_of.attribute}
    weights = {t.name: t for t in g.initializer}
    inputs = {v.name: v for v in g.input}
    outputs = {v.name: v for v in g.output}
    folder.mkdir()
    for name, body, past in (
        ("decoder_model.onnx", bodies["else_branch"], False),
        ("decoder_with_past_model.onnx", bodies["then_branch"], True),
    ):
        kept = [o.name for o in body.output if past is False or ".encoder." not in o.name]
        nodes, needed = [], set(kept)
        for node in reversed(body.node):  # only what the kept outputs need
            if needed & set(node.output):
                nodes.insert(0, node)
                needed |= set(node.input)
        fed = [v for k, v in inputs.items() if k in needed and k != "use_cache_branch"]
        graph = helper.make_graph(
            nodes,
            g.name,
            fed,
            [outputs[k] for k in kept],
            initializer=[t for k, t in weights.items() if k in needed],
        )
        model = helper.make_model(graph, opset_imports=merged.opset_import)
        model.ir_version = merged.ir_version
        onnx.save(model, str(folder / name))
    for other in ("encoder_model.onnx", "config.json", "generation_config.json"):
        shutil.copy(HERE / other, folder / other)
    return folder


def test_optimums_unmerged_pair_is_read_and_its_generation_refused_with_the_merge(
    tmp_path: Path,
) -> None:
    """A folder of optimum's unmerged pair: ortlab loads the with-past decoder and says what
    it is (not a decoder alone: its cross cache is fed, never returned), the verbs that run a
    loop refuse it with the merge that makes one file (a RunError 'Missing Input:
    past_key_values.0.encoder.key' before), and each file still runs alone. The pair is a real
    loop: plain onnxruntime, first step then with-past steps, gives optimum's tokens."""
    pair = unmerged_pair(tmp_path / "whisper_unmerged")
    m = ortlab.load(pair)
    d = m.decoder
    assert m.path.name == "decoder_with_past_model.onnx" and d is not None
    assert (d.first_step, d.encoder) == ("decoder_model.onnx", "encoder_model.onnx")
    assert d.line().startswith("the with-past half of optimum's unmerged pair (decoder_model")
    assert "unmerged pair" in m.summary.decoder
    for verb in (
        lambda: ortlab.generate(pair, feeds={"input_features": _features()}, progress=False),
        lambda: ortlab.llm_bench(m, progress=False),
        lambda: ortlab.kl_divergence(m, m, progress=False),
    ):
        with pytest.raises(UnsupportedModelError, match=r"merge_decoders\('decoder_model.onnx'"):
            verb()
    assert ortlab.benchmark(m, runs=2, warmup=1, progress=False).stats.count == 2
    # the two files in a loop, as optimum's ORTModelForSpeechSeq2Seq runs them
    cpu = ["CPUExecutionProvider"]
    enc = ort.InferenceSession(str(pair / "encoder_model.onnx"), providers=cpu)
    first = ort.InferenceSession(str(pair / "decoder_model.onnx"), providers=cpu)
    step = ort.InferenceSession(str(pair / "decoder_with_past_model.onnx"), providers=cpu)
    states = enc.run(None, {"input_features": _features()})[0]
    ids = np.asarray([REFERENCE["decoder_start"]], np.int64)
    outs = dict(
        zip(
            [o.name for o in first.get_outputs()],
            first.run(None, {"input_ids": ids, "encoder_hidden_states": states}),
            strict=True,
        )
    )
    tokens, past = [], {}
    for _ in range(REFERENCE["new_tokens"]):
        tokens.append(int(outs["logits"][0, -1].argmax()))
        past |= {
            k.replace("present", "past_key_values"): v for k, v in outs.items() if k != "logits"
        }
        feeds = {"input_ids": np.asarray([[tokens[-1]]], np.int64), **past}
        outs = dict(zip([o.name for o in step.get_outputs()], step.run(None, feeds), strict=True))
    assert tokens == REFERENCE["optimum_generate"]


T5 = Path(ortlab.__file__).parent / "decoders" / "optimum_t5"
T5_REFERENCE = json.loads((T5 / "seq2seq.json").read_text())


def _features() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1, 80, 3000)).astype(np.float32)


def _source() -> dict[str, np.ndarray]:
    ids = np.random.default_rng(0).integers(2, 1000, (1, 12))
    return {"input_ids": ids, "attention_mask": np.ones_like(ids)}


@pytest.mark.slow
def test_generate_runs_the_encoder_once_then_both_caches() -> None:
    """Item 2: the tokens equal optimum's ORTModelForSpeechSeq2Seq.generate (recorded) and
    the plain loop above; TTFT is each run's encoder step plus its first decoder step; the
    encoder is its own phase, its nodes the encoder file's."""
    g = ortlab.generate(HERE, feeds={"input_features": _features()}, new_tokens=16, progress=False)
    assert g.tokens == REFERENCE["optimum_generate"]
    assert g.encoder == "encoder_model" and len(g.encoder_ms) == g.runs >= 6
    ttft = np.median([e + r[0] for e, r in zip(g.encoder_ms, g.steps_ms, strict=True)])
    assert g.ttft_ms[0] == pytest.approx(ttft)
    assert all(e >= m for e, m in zip(g.encoder_ms, g.encoder_model_ms, strict=True))
    t = g.per_token
    assert list(t["phase"][:2]) == ["encoder", "prefill"] and t["step"][0] == -1
    phases = g.by_phase()
    assert list(dict.fromkeys(phases["phase"])) == ["encoder", "prefill", "decode"]
    enc = phases[phases["phase"] == "encoder"]
    assert enc["share"].sum() == pytest.approx(1.0)
    ops = {n.op_type for n in ortlab.load(HERE / "encoder_model.onnx").proto.graph.node}
    assert {"Conv", "Softmax"} <= set(enc["op_type"]) and "Conv" in ops
    head = g.headline()
    assert head["encoder_ms"]["median"] == pytest.approx(g.encoder_step_ms[0], abs=1e-4)
    assert "TTFT includes the encoder" in head["what"]
    assert "encoder" in g.to_text() and "the encoder's run and the decoder's first" in g.to_text()


def test_t5_tokens_equal_optimums_and_a_given_decoder_prompt_continues() -> None:
    """A text encoder-decoder (its encoder's mask fed to the decoder's cross-attention): the
    tokens equal ORTModelForSeq2SeqLM.generate's; starting from the start id and the first
    token the reference made gives the reference's next tokens."""
    ref = T5_REFERENCE["optimum_generate"]
    g = ortlab.generate(T5, feeds=_source(), new_tokens=16, runs=2, profile=False, progress=False)
    assert g.tokens == ref == T5_REFERENCE["ort_greedy_tokens"]
    assert "decoder_prompt [0]" in g.feeds and not g.synthetic
    start = [*T5_REFERENCE["decoder_start"], ref[0]]
    h = ortlab.generate(
        T5,
        feeds=_source(),
        decoder_prompt=start,
        new_tokens=8,
        runs=2,
        profile=False,
        progress=False,
    )
    assert h.tokens == ref[1:9] and h.prompt == 2


def test_encoder_feeds_are_the_encoders_or_a_clear_error() -> None:
    with pytest.raises(FeedError, match=r"encoder's inputs \(input_ids, attention_mask"):
        ortlab.generate(T5, feeds={"input_features": _features()}, progress=False)
    with pytest.raises(FeedError, match="decoder_prompt= is an encoder-decoder"):
        ortlab.generate(
            Path(ortlab.__file__).parent / "decoders" / "genai_int4",
            decoder_prompt=[1],
            progress=False,
        )
    g = ortlab.generate(T5, new_tokens=2, runs=1, profile=False, progress=False)
    assert g.synthetic and "(synthetic, seeded)" in g.feeds


def test_the_cli_generates_an_encoder_decoder(tmp_path: Path) -> None:
    from ortlab.cli import main

    np.savez(tmp_path / "src.npz", **_source())
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(
            [
                "generate",
                str(T5),
                "--feeds",
                str(tmp_path / "src.npz"),
                "--new",
                "6",
                "--runs",
                "2",
                "--json",
            ]
        )
    data = json.loads(out.getvalue())
    assert data["data"]["tokens"] == T5_REFERENCE["optimum_generate"][:6]
    assert data["headline"]["encoder"] == "encoder_model"


@pytest.mark.slow
def test_the_doctor_generates_an_encoder_decoder_with_its_encoder() -> None:
    """The doctor's generation stage on T5: the baseline's tokens are the reference's (the
    encoder ran first, its synthetic source made as generate makes it), each candidate is
    generated with the encoder too (its tokens kept: the same model), and no variant is
    proposed without its KLD."""
    d = ortlab.doctor(T5, budget_s=40, progress=False, quantize=False, memory=False)
    gen = d.generation
    assert gen is not None and gen.prompt == 1
    assert gen.baseline.encoder == "encoder_model" and gen.baseline.encoder_ms
    synthetic = ortlab.generate(
        T5, new_tokens=gen.new_tokens, runs=1, profile=False, progress=False
    )
    assert gen.baseline.tokens == synthetic.tokens
    assert gen.trials and all(t.tokens_kept == gen.new_tokens for t in gen.trials)
    assert "Missing Input" not in d.to_text() and "fails" not in d.to_text()
