"""Decoders whose cache is not one growing K/V (issue 60): a Gemma-2-shaped folder from
onnxruntime-genai's builder (ortlab/decoders/genai_gemma2_int4, scripts/make_decoders.py) whose
sliding-window layers keep a fixed buffer of window slots from the first step on and whose
global layers grow. Checked against independent sources: the graph's own attributes and the
folder's genai_config.json read here, plain onnxruntime running every input ortlab invents, a
bare onnxruntime loop written here, and onnxruntime-genai's generator (its tokens recorded in
reference.json, and run live where it is installed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ortlab
from ortlab.core.decoder import DecoderInfo

FOLDER = Path(ortlab.__file__).parent / "decoders" / "genai_gemma2_int4"
REFERENCE = json.loads((FOLDER.parent / "reference.json").read_text())
GENAI_TOKENS = REFERENCE["models"]["genai_gemma2_int4"]["genai_greedy_tokens"]
PROMPT = np.asarray([REFERENCE["prompt"]], dtype=np.int64)
CONFIG = json.loads((FOLDER / "genai_config.json").read_text())["model"]["decoder"]
WINDOW = CONFIG["sliding_window"]["window_size"]
SLIDING = set(CONFIG["sliding_window"]["layers"])


def _decoder() -> tuple[ortlab.Model, DecoderInfo]:
    m = ortlab.load(FOLDER)
    assert m.decoder is not None
    return m, m.decoder


def _session() -> ort.InferenceSession:
    return ort.InferenceSession(str(FOLDER / "model.onnx"), providers=["CPUExecutionProvider"])


def _bare_loop(new_tokens: int) -> tuple[list[int], list[int]]:
    """Greedy in plain onnxruntime, written from the folder's config alone: the sliding
    layers' past is a buffer of window slots from the first step (the present comes back as
    long), the global layers' past grows. Returns the tokens and the cache's bytes after each
    step."""
    sess = _session()
    names = [o.name for o in sess.get_outputs()]
    kv, hs = CONFIG["num_key_value_heads"], CONFIG["head_size"]
    past = {
        f"past_key_values.{i}.{kv_name}": np.zeros(
            (1, kv, WINDOW if i in SLIDING else 0, hs), np.float32
        )
        for i in range(CONFIG["num_hidden_layers"])
        for kv_name in ("key", "value")
    }
    ids, length, tokens, held = PROMPT, 0, [], []
    for _ in range(new_tokens):
        mask = np.ones((1, length + ids.shape[1]), np.int64)
        out = dict(
            zip(
                names,
                sess.run(None, {"input_ids": ids, "attention_mask": mask, **past}),
                strict=True,
            )
        )
        tokens.append(int(out["logits"][0, -1].argmax()))
        length += ids.shape[1]
        past = {k: out[k.replace("past_key_values", "present")] for k in past}
        held.append(sum(v.nbytes for v in past.values()))
        ids = np.array([[tokens[-1]]], np.int64)
    return tokens, held


def _generate(
    folder: Path, new_tokens: int, *, share_buffer: bool | None = None, profile: bool = False
) -> ortlab.GenerationResult:
    """One greedy generation after the reference prompt."""
    return ortlab.generate(
        folder,
        feeds={"input_ids": PROMPT},
        new_tokens=new_tokens,
        runs=1,
        profile=profile,
        share_buffer=share_buffer,
        progress=False,
    )


def test_the_caches_roles_come_from_the_graph_and_agree_with_the_config() -> None:
    """Each layer's cache: windowed (a fixed buffer of the window's slots) exactly where the
    graph's GroupQueryAttention keeps a sliding-window cache, which is where genai_config says;
    the others grow. The bytes per token count the growing layers, the fixed bytes the
    windowed buffers, both by formula from the config."""
    m, d = _decoder()
    graph = onnx.load(str(FOLDER / "model.onnx"), load_external_data=False).graph
    by_past: dict[str, dict[str, int]] = {}
    for node in graph.node:
        if node.op_type == "GroupQueryAttention":
            attrs = {a.name: a.i for a in node.attribute if a.type == onnx.AttributeProto.INT}
            by_past[node.input[3]] = attrs
    assert len(by_past) == d.layers == CONFIG["num_hidden_layers"] == 4
    for p in d.pairs:
        attrs = by_past[p.past_key]
        windowed = attrs.get("sliding_window_cache", 0) == 1
        assert windowed == (p.layer in SLIDING)
        assert (p.role, p.window, p.capacity) == (
            ("windowed", WINDOW, WINDOW) if windowed else ("grows", 0, 0)
        )
    slot = 2 * CONFIG["num_key_value_heads"] * CONFIG["head_size"] * 4
    growing = CONFIG["num_hidden_layers"] - len(SLIDING)
    assert d.kv_bytes_per_token == slot * growing
    assert d.fixed_cache_bytes == slot * WINDOW * len(SLIDING)
    assert d.cache_bytes(100) == slot * (growing * 100 + WINDOW * len(SLIDING))
    line = m.summary.decoder
    assert f"layers 0, 2: sliding window of {WINDOW}, a fixed {WINDOW}-slot buffer" in line
    assert "layers 1, 3: global, grows" in line
    # a decoder whose caches all grow says nothing of windows
    plain = ortlab.examples.load("tiny_llama_int4").decoder
    assert plain is not None and plain.cache_kinds() == "" and plain.fixed_cache_bytes == 0


@pytest.mark.parametrize("dims", [{"prompt": 32}, {"prompt": 1000}, {"prompt": 1, "past": 32}])
def test_invented_inputs_run_in_plain_onnxruntime(dims: dict[str, int]) -> None:
    """A prefill of 32 and of 1,000 tokens (past the window) and one decode step over 32 cached
    tokens: the windowed layers' past is their buffer at its capacity, the global layers' the
    past; plain onnxruntime runs them, and each present is as long as the formula says."""
    m, d = _decoder()
    feeds = m.example_inputs(dims=dims)
    prompt, past = dims["prompt"], dims.get("past", 0)
    for p in d.pairs:
        assert feeds[p.past_key].shape[2] == (WINDOW if p.layer in SLIDING else past)
    sess = _session()
    names = [o.name for o in sess.get_outputs()]
    out = dict(zip(names, sess.run(None, dict(feeds)), strict=True))
    assert out["logits"].shape == (1, prompt, REFERENCE["gemma2_config"]["vocab_size"])
    for p in d.pairs:
        assert out[p.present_key].shape[2] == p.slots(past + prompt)
    assert sum(out[n].nbytes for p in d.pairs for n in (p.present_key, p.present_value)) == (
        d.cache_bytes(past + prompt)
    )
    assert "fixed 8-slot buffers" in feeds.notes[-1]


@pytest.mark.parametrize("share_buffer", [False, True])
def test_generate_equals_genai_and_a_bare_loop_past_the_window(share_buffer: bool) -> None:
    """8 prompt + 16 new tokens with a window of 8: ortlab's tokens equal onnxruntime-genai's
    (recorded) and a bare onnxruntime loop's, with the buffers written in place and without;
    without, the present bytes measured after each step equal the bare loop's and the
    formula's."""
    n = REFERENCE["new_tokens"]
    assert len(PROMPT[0]) + n > 2 * WINDOW  # the test runs past the window
    tokens, held = _bare_loop(n)
    assert tokens == GENAI_TOKENS
    g = _generate(FOLDER, n, share_buffer=share_buffer)
    assert g.tokens == GENAI_TOKENS
    _, d = _decoder()
    kv = g.kv_cache
    assert kv["peak_bytes"] == d.cache_bytes(len(PROMPT[0]) + n - 1)
    assert g.fixed_cache_bytes == d.fixed_cache_bytes
    if share_buffer:  # the global layers' buffers at max length, the windowed at their slots
        search = json.loads((FOLDER / "genai_config.json").read_text())["search"]
        assert g.shared_buffer == search["max_length"]
        assert kv["measured_peak_bytes"] == d.kv_bytes_per_token * g.shared_buffer + (
            d.fixed_cache_bytes
        )
    else:
        assert g.present_bytes == held
        assert kv["measured_peak_bytes"] == kv["peak_bytes"]
        assert kv["measured_bytes_per_token"] == d.kv_bytes_per_token
    assert "fixed-size state" in g.to_text()


def test_genais_generator_gives_the_recorded_tokens() -> None:
    """The recorded reference is what onnxruntime-genai's generator makes of the folder now."""
    og: Any = pytest.importorskip("onnxruntime_genai")
    model = og.Model(str(FOLDER))
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=PROMPT.shape[1] + len(GENAI_TOKENS))
    gen = og.Generator(model, params)
    gen.append_tokens(PROMPT)
    got = []
    while not gen.is_done():
        gen.generate_next_token()
        got.append(int(gen.get_next_tokens()[0]))
    assert got == GENAI_TOKENS


def test_llm_bench_and_kl_divergence_run_past_the_window() -> None:
    """llama-bench's tests at a depth beyond the window run (every step's cache as the
    generation makes it); the KL divergence of the folder against itself is zero."""
    b = ortlab.llm_bench(
        FOLDER,
        prompt=[16],
        new_tokens=[4],
        depth=[0, 2 * WINDOW],
        repetitions=2,
        profile=False,
        progress=False,
    )
    assert sorted(r.n_depth for r in b.rows) == [0, 0, 2 * WINDOW, 2 * WINDOW]
    assert all(len(r.samples_ns) == 2 and min(r.samples_ns) > 0 for r in b.rows)
    assert "sliding window of 8" in b.to_text()
    kl = ortlab.kl_divergence(FOLDER, FOLDER, length=3 * WINDOW, window=2 * WINDOW, progress=False)
    assert not kl.failed and len(kl.rows) == 1
    assert kl.rows[0].max == pytest.approx(0.0, abs=1e-9) and kl.rows[0].top1 == 1.0


# --------------------------------------------------------------------- a carried conv state

LFM2 = FOLDER.parent / "genai_lfm2_int4"
LFM2_TOKENS = REFERENCE["models"]["genai_lfm2_int4"]["genai_greedy_tokens"]
LFM2_CONFIG = REFERENCE["lfm2_config"]


def _lfm2_bare_loop(new_tokens: int) -> tuple[list[int], list[int]]:
    """Greedy in plain onnxruntime from the graph's declared inputs alone: each past input
    (K/V or carried state) empty or zero before the first step, its present fed back after."""
    sess = ort.InferenceSession(str(LFM2 / "model.onnx"), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    past: dict[str, np.ndarray] = {}
    for i in sess.get_inputs():
        if i.name.startswith("past_key_values."):
            past[i.name] = np.zeros((1, i.shape[1], 0, 16), np.float32)
        elif i.name.startswith("past."):
            past[i.name] = np.zeros((1, *i.shape[1:]), np.float32)
    ids, length, tokens, held = PROMPT, 0, [], []
    for _ in range(new_tokens):
        mask = np.ones((1, length + ids.shape[1]), np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, **past}
        out = dict(zip(names, sess.run(None, feeds), strict=True))
        tokens.append(int(out["logits"][0, -1].argmax()))
        length += ids.shape[1]
        past = {
            k: out[k.replace("past_key_values", "present").replace("past.", "present.")]
            for k in past
        }
        held.append(sum(v.nbytes for v in past.values()))
        ids = np.array([[tokens[-1]]], np.int64)
    return tokens, held


def test_a_hybrid_decoders_convolution_states_come_from_the_graph() -> None:
    """LFM2: the layers whose state is a convolution's are those whose past input a
    CausalConvWithState reads, its dims hidden x (L_cache - 1) as the config says; the model
    has all its layers (conv and attention), its state bytes exact, and by_layer() finds each
    layer from the graph (the conv op of layer n in layer n)."""
    m = ortlab.load(LFM2)
    d = m.decoder
    assert d is not None
    graph = onnx.load(str(LFM2 / "model.onnx"), load_external_data=False).graph
    conv_reads = {
        n.input[i]
        for n in graph.node
        if n.op_type == "CausalConvWithState"
        for i in range(len(n.input))
    }
    conv_layers = [i for i, t in enumerate(LFM2_CONFIG["layer_types"]) if t == "conv"]
    assert [st.layer for st in d.states] == conv_layers
    assert all(st.past in conv_reads and st.kind == "convolution state" for st in d.states)
    hidden, width = LFM2_CONFIG["hidden_size"], LFM2_CONFIG["conv_L_cache"] - 1
    assert all(st.shape == (hidden, width) for st in d.states)
    assert d.state_bytes == len(conv_layers) * hidden * width * 4
    assert d.layers == LFM2_CONFIG["num_hidden_layers"]
    assert [p.layer for p in d.pairs] == [
        i for i, t in enumerate(LFM2_CONFIG["layer_types"]) if t != "conv"
    ]
    assert "layers 0, 2: convolution state 64 x 2 (CausalConvWithState)" in m.summary.decoder
    layers = m.layers
    assert layers is not None
    for node in graph.node:
        if node.op_type == "CausalConvWithState":
            st = next(s for s in d.states if s.past in node.input)
            assert layers.layer[node.name] == st.layer


@pytest.mark.parametrize("dims", [{"prompt": 32}, {"prompt": 1, "past": 32}])
def test_a_hybrid_decoders_invented_inputs_run_in_plain_onnxruntime(dims: dict[str, int]) -> None:
    m = ortlab.load(LFM2)
    feeds = m.example_inputs(dims=dims)
    sess = ort.InferenceSession(str(LFM2 / "model.onnx"), providers=["CPUExecutionProvider"])
    out = sess.run(["logits"], dict(feeds))[0]
    assert out.shape == (1, dims["prompt"], LFM2_CONFIG["vocab_size"])
    assert "carried states" in feeds.notes[-1]


@pytest.mark.parametrize("share_buffer", [False, True])
def test_a_hybrid_decoder_generates_genais_tokens_carrying_its_state(share_buffer: bool) -> None:
    """ortlab's tokens equal onnxruntime-genai's (recorded) and a bare loop's written here;
    the bytes carried after each step equal the bare loop's (present K/V and states) and the
    formula's."""
    n = REFERENCE["new_tokens"]
    tokens, held = _lfm2_bare_loop(n)
    assert tokens == LFM2_TOKENS
    g = _generate(LFM2, n, share_buffer=share_buffer, profile=not share_buffer)
    assert g.tokens == LFM2_TOKENS
    d = ortlab.load(LFM2).decoder
    assert d is not None and g.fixed_cache_bytes == d.state_bytes
    assert g.kv_cache["peak_bytes"] == d.cache_bytes(PROMPT.shape[1] + n - 1)
    if not share_buffer:
        assert g.present_bytes == held
        split = g.by_layer()
        found = set(split.layer.dropna().astype(int)) - {-1}
        assert found == set(range(d.layers))  # every layer, conv and attention, from the graph


# --------------------------------------------------------------------- mixture of experts

MOE = FOLDER.parent / "genai_gptoss_fp32"
MOE_REF = REFERENCE["models"]["genai_gptoss_fp32"]
MOE_CONFIG = REFERENCE["gptoss_config"]


def test_a_mixture_of_experts_generates_genais_tokens_and_says_its_experts() -> None:
    """gpt-oss: top-k of n read from the MoE ops as the config says; ortlab's tokens equal
    genai's and torch's (recorded); the profile splits each phase's time with the MoE nodes'
    share; each MoE node's cost counts k experts' weights per decode token (the weights'
    bytes read from the initializers here)."""
    m = ortlab.load(MOE)
    d = m.decoder
    assert d is not None and d.experts is not None
    k, n, routed, op = d.experts
    assert (k, n, routed, op) == (
        MOE_CONFIG["num_experts_per_tok"],
        MOE_CONFIG["num_local_experts"],
        MOE_CONFIG["num_hidden_layers"],
        "MoE",
    )
    assert f"mixture of experts: {k} of {n} per token" in m.summary.decoder
    g = _generate(MOE, REFERENCE["new_tokens"], profile=True)
    assert g.tokens == MOE_REF["genai_greedy_tokens"] == MOE_REF["torch_greedy_tokens"]
    by_phase = g.by_phase()
    moe = by_phase[by_phase.op_type == "MoE"]
    assert set(moe.phase) == {"prefill", "decode"} and (moe.share > 0).all()
    assert set(g.weights.op_type) >= {"MoE", "MatMul"}
    graph = onnx.load(str(MOE / "model.onnx"), load_external_data=False).graph
    sizes = {t.name: int(np.prod(t.dims)) * 4 for t in graph.initializer}
    node = next(x for x in graph.node if x.op_type == "MoE")
    expert_bytes = sum(sizes[i] for i in node.input[2:6]) / n
    roof = g.phase_roofline
    row = roof[(roof.node == node.name) & (roof.phase == "decode")].iloc[0]
    hidden = MOE_CONFIG["hidden_size"]
    activations = 4 * (hidden + n + hidden)  # x and the router's scores in, y out: one token
    assert row.bytes == pytest.approx(k * expert_bytes + activations)


def test_the_lab_the_cli_and_the_report_say_what_each_cache_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gpt-oss carries windows and experts: the Lab's Generate tab, the CLI's generate and the
    report each say so in the decoder's one line (windowed at N, experts k of n)."""
    from ortlab.cli import main

    m = ortlab.load(MOE)
    d = m.decoder
    assert d is not None and d.experts is not None
    k, n, _, _ = d.experts
    window = next(p.window for p in d.pairs if p.window)
    said = [f"sliding window of {window}", f"{k} of {n} per token"]
    lab = ortlab.Lab(m, synchronous=True, runs=3)
    lab.gen_prompt.value, lab.gen_new.value = 4, 3
    lab.gen_button.click()
    assert lab.error.value == "" and lab.generation is not None
    html = lab.generation._repr_html_()
    assert all(s in html for s in said)
    assert main(["generate", str(MOE), "--prompt", "4", "--new", "2"]) == 0
    text = capsys.readouterr().out
    assert all(s in text for s in said)
    page = ortlab.report(m, path=tmp_path / "r.html", compute=False).read_text()
    assert all(s in page for s in said)
