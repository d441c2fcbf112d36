"""LLM decoders with a KV cache (issue 39), on tiny decoders made by the real exporters
(ortlab/decoders, bundled as ortlab.examples' tiny_* models; scripts/make_decoders.py):
onnxruntime-genai's builder (int4, fp32),
optimum's merged GPT-2 (its graph in an If on use_cache_branch) and optimum's Llama. Checked
against independent sources: the exporters' own configs, plain onnxruntime running every input
ortlab invents, onnxruntime-genai's generator and torch's greedy tokens (reference.json)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ortlab
from ortlab.cli import main
from ortlab.core.errors import FeedError, InvalidModelError
from ortlab.core.units import fmt_interval
from ortlab.views.html import esc

HERE = Path(ortlab.__file__).parent / "decoders"
NAMES = ("genai_int4", "genai_fp32", "optimum_gpt2_merged", "optimum_llama")
REFERENCE = json.loads((HERE / "reference.json").read_text())
PROMPT = np.asarray([REFERENCE["prompt"]], dtype=np.int64)


def _session(m: ortlab.Model) -> Any:
    return ort.InferenceSession(str(m.path), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("name", NAMES)
def test_a_decoder_folder_loads_and_says_what_it_is(name: str) -> None:
    """The folder loads its model; DecoderInfo equals what the exporter's own config says
    (genai_config.json or config.json, read here independently)."""
    m = ortlab.load(HERE / name)
    d = m.decoder
    assert d is not None and m.name == name
    genai = HERE / name / "genai_config.json"
    if genai.exists():
        cfg = json.loads(genai.read_text())["model"]
        dec = cfg["decoder"]
        want = (dec["num_hidden_layers"], dec["num_attention_heads"])
        want += (dec["num_key_value_heads"], dec["head_size"], cfg["vocab_size"])
        assert d.source == "genai_config.json"
        assert d.attention == "GroupQueryAttention"
    else:
        hf = json.loads((HERE / name / "config.json").read_text())
        heads = hf.get("num_attention_heads", hf.get("n_head"))
        hidden = hf.get("hidden_size", hf.get("n_embd"))
        want = (hf.get("num_hidden_layers", hf.get("n_layer")), heads)
        want += (hf.get("num_key_value_heads", heads), hidden // heads, hf["vocab_size"])
        assert d.source == "config.json"
    assert (d.layers, d.heads, d.kv_heads, d.head_size, d.vocab) == want
    assert (d.use_cache_branch is not None) == (name == "optimum_gpt2_merged")
    assert ("int4 MatMulNBits" in d.weights) == (name == "genai_int4")
    nbits = [
        n
        for n in onnx.load(m.path, load_external_data=False).graph.node
        if n.op_type == "MatMulNBits"
    ]
    if nbits:  # the typed format reads the op's own attributes, the label is made from it
        attrs = {a.name: a.i for a in nbits[0].attribute}
        f = d.weight_format
        assert (f.kind, f.op, f.bits, f.block) == ("int4", "MatMulNBits", 4, attrs["block_size"])
        assert (
            f.quantized
            and d.weights
            == f.label()
            == f"int4 MatMulNBits (block {f.block}, accuracy level {f.accuracy_level})"
        )
    else:
        assert d.weight_format.kind == "fp32" and not d.weight_format.quantized
    line = m.summary.decoder
    assert line.startswith(f"decoder with KV cache: {d.layers} layers, {d.heads} heads / ")
    assert line in m.summary.to_text() and "kind" in m.summary._repr_html_()


def test_other_models_are_not_decoders_and_a_plain_folder_says_what_it_holds(
    tmp_path: Path,
) -> None:
    assert ortlab.examples.load("mlp").decoder is None
    assert ortlab.examples.load("bert_tiny").decoder is None
    (tmp_path / "a.onnx").write_bytes(ortlab.examples.path("mlp").read_bytes())
    with pytest.raises(InvalidModelError, match=r"a\.onnx.*pass the \.onnx file"):
        ortlab.load(tmp_path)
    with pytest.raises(FeedError, match="not a decoder"):
        ortlab.generate(ortlab.examples.load("mlp"), progress=False)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    "dims", [None, {"prompt": 8}, {"prompt": 1, "past": 8}, {"prompt": 3, "past": 40}]
)
def test_plain_onnxruntime_runs_every_input_ortlab_invents(name: str, dims: Any) -> None:
    """Prefill and decode steps: ids in the vocabulary, a mask of past + new ones, positions
    continuing the past, the cache at the model's KV heads and head size, use_cache_branch set
    to the phase; onnxruntime runs them and its present outputs are past + new long."""
    m = ortlab.load(HERE / name)
    d = m.decoder
    assert d is not None
    f = m.example_inputs(dims=dims)
    past, prompt = f.dims["past"].value, f.dims["prompt"].value
    if dims is None:
        assert "guessed" in f.dims["past"].why and prompt == 1 and past > 0
    else:
        assert f.dims["prompt"].why == "given" and prompt == dims["prompt"]
    ids = f[d.input_ids]
    assert ids.shape == (1, prompt) and ids.min() >= 0 and ids.max() < d.vocab
    if d.mask:
        assert f[d.mask].shape == (1, past + prompt) and (f[d.mask] == 1).all()
    if d.positions:
        assert f[d.positions].tolist() == [list(range(past, past + prompt))]
    if d.use_cache_branch:
        assert f[d.use_cache_branch].tolist() == [past > 0]
    s = _session(m)
    outs = dict(zip([o.name for o in s.get_outputs()], s.run(None, dict(f)), strict=True))
    for p in d.pairs:
        assert outs[p.present_key].shape == (1, d.kv_heads, past + prompt, d.head_size)
    assert outs["logits"].shape[:2] == (1, prompt)
    assert any("synthetic" in n for n in f.notes)


def test_prompt_and_past_as_keywords_make_the_same_inputs_as_dims() -> None:
    """``example_inputs(prompt=32)`` / ``(prompt=1, past=32)`` as the README writes them: the
    same arrays and dims as ``dims=``; a model that is no decoder, a role given twice with two
    values, or roles beside ``like=`` are refused with what to do instead."""
    m = ortlab.load(HERE / "genai_int4")
    for roles in ({"prompt": 32}, {"prompt": 1, "past": 32}, {"prompt": 1, "past": 8, "batch": 2}):
        by_keyword, by_dims = m.example_inputs(**roles), m.example_inputs(dims=roles)
        assert by_keyword.keys() == by_dims.keys()
        assert all(np.array_equal(by_keyword[k], by_dims[k]) for k in by_dims)
        assert by_keyword.describe() == by_dims.describe()
    same = m.example_inputs(dims={"past": 32}, prompt=1)
    assert same.dims["past"].value == 32 and same.dims["prompt"].value == 1
    with pytest.raises(FeedError, match="past is given twice, 16 in dims= and past=32"):
        m.example_inputs(dims={"past": 16}, past=32)
    with pytest.raises(FeedError, match="like="):
        m.example_inputs(like=dict(same), prompt=1)
    with pytest.raises(FeedError, match=r"prompt=, past=: mlp is not an LLM decoder.*dims="):
        ortlab.examples.load("mlp").example_inputs(prompt=1, past=4)


def test_a_decode_mask_of_past_plus_new_is_accepted_whatever_the_export_declared() -> None:
    """optimum's merged GPT-2 declares the mask with the new tokens' dim; a decode step's mask
    is past + new long: plain onnxruntime runs it, so every ortlab verb must take it."""
    m = ortlab.load(HERE / "optimum_gpt2_merged")
    d = m.decoder
    assert d is not None
    mask = next(t for t in m.inputs if t.name == d.mask)
    assert mask.shape == next(t for t in m.inputs if t.name == d.input_ids).shape, "premise"
    feeds = {k: np.asarray(v) for k, v in m.example_inputs(dims={"prompt": 1, "past": 32}).items()}
    _session(m).run(None, feeds)  # plain onnxruntime: fine
    b = ortlab.benchmark(m, feeds=feeds, runs=3, warmup=1, progress=False)
    assert b.stats.count == 3 and "[1, 33]" in b.feeds


def test_steps_ort_refuses_are_refused_with_the_reason() -> None:
    m = ortlab.load(HERE / "genai_int4")
    with pytest.raises(FeedError, match="GroupQueryAttention"):
        m.example_inputs(dims={"prompt": 4, "past": 8, "batch": 2})
    with pytest.raises(FeedError, match="beyond the 512"):
        m.example_inputs(dims={"prompt": 8, "past": 510})
    f = m.example_inputs(dims={"prompt": 1, "past": 8, "batch": 3})  # batched decode: fine
    _session(m).run(None, dict(f))


@pytest.mark.parametrize("name", NAMES)
def test_generate_gives_the_reference_generators_greedy_tokens(name: str) -> None:
    """The tokens equal torch's greedy loop on the source checkpoint and onnxruntime-genai's
    generator (recorded when the models were made), and the cache grows by the formula."""
    ref = REFERENCE["models"][name]
    want = ref.get("torch_greedy_tokens") or ref["genai_greedy_tokens"]
    g = ortlab.generate(
        HERE / name,
        feeds={"input_ids": PROMPT},
        new_tokens=len(want),
        runs=2,
        share_buffer=False,  # present -> past: the cache's growth is measured step by step
        progress=False,
    )
    assert g.tokens == want and g.synthetic is False
    d = ortlab.load(HERE / name).decoder
    assert d is not None
    formula = 2 * d.layers * d.kv_heads * d.head_size * 4  # fp32 cache
    kv = g.kv_cache
    assert kv["bytes_per_token"] == formula == kv["measured_bytes_per_token"]
    assert kv["measured_peak_bytes"] == formula * (PROMPT.shape[1] + len(want) - 1)
    t = g.per_token
    assert list(t["past_length"]) == [0, *range(PROMPT.shape[1], PROMPT.shape[1] + len(want) - 1)]
    assert (t["low_ms"] <= t["ms"]).all() and (t["ms"] <= t["high_ms"]).all()
    assert list(t["phase"]).count("prefill") == 1


@pytest.mark.parametrize("name", ["genai_int4", "genai_fp32"])
def test_generate_equals_onnxruntime_genais_generator_run_here(name: str) -> None:
    """The reference run live: onnxruntime-genai's own generator on the same folder (installed
    --no-deps beside onnxruntime-gpu by the project's bootstrap)."""
    og = pytest.importorskip("onnxruntime_genai")
    model = og.Model(str(HERE / name))
    params = og.GeneratorParams(model)
    new = 12
    params.set_search_options(do_sample=False, max_length=PROMPT.shape[1] + new)
    gen = og.Generator(model, params)
    gen.append_tokens(PROMPT[0].tolist())
    theirs = []
    while not gen.is_done():
        gen.generate_next_token()
        theirs.append(int(gen.get_next_tokens()[0]))
    g = ortlab.generate(HERE / name, feeds={"input_ids": PROMPT}, new_tokens=new, progress=False)
    assert g.tokens == theirs[:new]


def test_generate_reports_phases_with_intervals_and_round_trips(capsys: Any) -> None:
    g = ortlab.generate(HERE / "genai_int4", prompt=16, new_tokens=6, runs=6, progress=False)
    mid, low, high = g.decode_tokens_per_s
    assert low <= mid <= high and mid > 0, "6 runs: a 95 % interval over runs"
    ttft = g.ttft_ms
    assert ttft[1] <= ttft[0] <= ttft[2]
    per_run = [1e3 * 5 / sum(r[1:]) for r in g.steps_ms]  # each run's decode rate, by hand
    assert mid == pytest.approx(float(np.median(per_run)))
    assert g.synthetic and any("synthetic" in n for n in g.notes)
    again = ortlab.GenerationResult.from_json(g.to_json())
    assert again == g and "tokens/s" in g.to_text() and "<table" in g._repr_html_()
    assert g.plot().data[1].x == tuple(range(16, 16 + 5))  # [0] is the range band
    assert (
        main(
            [
                "generate",
                str(HERE / "optimum_gpt2_merged"),
                "--prompt",
                "8",
                "--new",
                "3",
                "--runs",
                "2",
                "--json",
            ]
        )
        == 0
    )
    cli = ortlab.GenerationResult.from_json(capsys.readouterr().out)
    assert cli.prompt == 8 and len(cli.tokens) == 3


def test_a_sweep_over_the_past_keeps_every_point_a_valid_step() -> None:
    """past=0 is the prefill (a size, not refused); each point's mask and positions follow
    its past, so plain onnxruntime's present length is past + prompt at every point."""
    m = ortlab.load(HERE / "optimum_llama")
    s = ortlab.sweep(m, dims={"past": [0, 16, 64]}, runs=3, progress=False)
    assert [r.dims["past"] for r in s.rows] == [0, 16, 64] and not any(r.error for r in s.rows)
    d = m.decoder
    assert d is not None
    for past in (0, 16, 64):
        f = m.example_inputs(dims={"past": past})
        out = _session(m).run([d.pairs[0].present_key], dict(f))[0]
        assert out.shape[2] == past + f.dims["prompt"].value


@pytest.mark.parametrize(("past", "ran", "idle"), [(16, "then", "else"), (0, "else", "then")])
def test_a_merged_decoder_credits_the_branch_that_ran(past: int, ran: str, idle: str) -> None:
    """optimum's merged GPT-2 repeats its network in both branches of one If with the same
    names. ONNX's If runs then_branch when use_cache_branch is True (a decode step: past > 0):
    that branch's nodes hold the time, the If is kept, the other branch did not run; node
    times add up to the profile's own node total; the graph shows the same."""
    m = ortlab.load(HERE / "optimum_gpt2_merged")
    prompt = 1 if past else 8
    pl = ortlab.placement(m, dims={"prompt": prompt, "past": past}, runs=3, progress=False)
    scope = {n.name: n.parent for n in m.nodes}
    rows = {r.node: r for r in pl.node_rows}
    the_if = next(n.name for n in m.nodes if n.op_type == "If")
    assert rows[the_if].status == "kept" and rows[the_if].us_per_run > 0
    time = {"then": 0.0, "else": 0.0}
    for name, r in rows.items():
        if scope[name]:
            time[scope[name].rpartition("/")[2].split("_")[0]] += r.us_per_run
    assert time[ran] > 0 and time[idle] == 0
    idle_rows = [r for n, r in rows.items() if scope[n].endswith(f"{idle}_branch")]
    assert all(r.time_source.startswith("not run") for r in idle_rows)
    assert not any(
        r.status == "eliminated"
        for n, r in rows.items()
        if scope[n].endswith(f"{ran}_branch") and r.us_per_run > 0
    )
    assert any(f"ran its {ran}_branch" in n for n in pl.notes)
    total = float(pl.profile.by_node()["us_per_run"].sum())
    assert sum(r.us_per_run for r in rows.values()) == pytest.approx(total, rel=0.02)
    groups = {gr.label: gr.us_per_run for gr in ortlab.graph(m, placement=pl).graph_data.groups}
    assert groups[f"{the_if} ▸ {ran}_branch"] > 0 and groups[f"{the_if} ▸ {idle}_branch"] == 0


def test_a_branch_that_repeats_a_node_name_loads_as_it_does_in_onnxruntime(
    tmp_path: Path,
) -> None:
    """Merged decoders in the wild repeat a node name inside a branch ('Constant_338' used by 2
    nodes in the 'with_past' body); plain onnxruntime loads and runs them, so ortlab must not
    call them malformed. A tensor made twice in a branch ORT refuses, and so does ortlab."""
    import onnx

    src = HERE / "optimum_gpt2_merged" / "decoder_model_merged.onnx"

    def edited(change: str) -> Path:
        p = onnx.load(str(src))
        body = next(a.g for a in p.graph.node[0].attribute if a.name == "then_branch")
        consts = [n for n in body.node if n.op_type == "Constant"]
        if change == "name":
            consts[1].name = consts[0].name
        else:
            consts[1].output[0] = consts[0].output[0]
        path = tmp_path / f"{change}.onnx"
        onnx.save(p, str(path))
        return path

    same_name = edited("name")
    ort.InferenceSession(str(same_name), providers=["CPUExecutionProvider"])  # ORT: fine
    m = ortlab.load(same_name)
    assert m.summary.defects == []
    f = m.example_inputs(dims={"prompt": 1, "past": 4})
    assert ortlab.benchmark(m, feeds=f, runs=2, warmup=0, progress=False).stats.count == 2
    twice = edited("tensor")
    with pytest.raises(Exception, match="invalid model"):
        ort.InferenceSession(str(twice), providers=["CPUExecutionProvider"])
    assert any("output of two nodes" in d for d in ortlab.load(twice).summary.defects)


def test_sizes_count_external_data() -> None:
    """genai's fp32 decoder keeps its weights in model.onnx.data: the model and its int8
    variant are compared by what they weigh on disk (the files, summed here by hand), so the
    variant is smaller, as it is (the .onnx files alone say the opposite)."""
    m = ortlab.load(HERE / "genai_fp32")
    on_disk = sum(f.stat().st_size for f in (HERE / "genai_fp32").glob("model.onnx*"))
    assert m.disk_bytes == on_disk and m.path.stat().st_size < on_disk / 10
    q = ortlab.quantize(m, mode="dynamic")
    c = ortlab.compare(m, [q], rounds=2, runs=2)
    row = c.rows[1]
    assert row.file_bytes == q.disk_bytes and row.size_ratio == pytest.approx(
        q.disk_bytes / on_disk
    )
    assert row.size_ratio < 0.5 < q.path.stat().st_size / m.path.stat().st_size
    assert "external data" in m.summary.to_text()


def test_a_merged_decoder_is_quantized_inside_its_branches_or_refused() -> None:
    """The whole network sits in an If: dynamic int8 quantizes inside the branches (its
    variant holds quantized ops, counted here in the saved graph, and runs a decode step in
    plain onnxruntime); static and int4, which onnxruntime's quantizers cannot do there, are
    refused saying why, never a variant with nothing quantized."""
    from ortlab.core.onnx_util import walk_nodes

    m = ortlab.load(HERE / "optimum_gpt2_merged")
    q = ortlab.quantize(m, mode="dynamic")
    body = [n.op_type for n, depth in walk_nodes(q.proto.graph) if depth > 0]
    assert body.count("MatMulInteger") >= 8 and "bodies included" in " ".join(q.variant.steps)
    f = q.example_inputs(dims={"prompt": 1, "past": 8})
    _session(q).run(None, dict(f))
    with pytest.raises(ortlab.QuantizationError, match="static quantizer does not enter"):
        ortlab.quantize(m, mode="static", calibration_size=2)
    with pytest.raises(ortlab.QuantizationError, match="inside If/Loop/Scan bodies"):
        ortlab.quantize(m, mode="int4")


@pytest.mark.slow
def test_the_doctor_on_a_merged_decoder_proposes_only_what_applies() -> None:
    """The transformers optimizer rewrites the main graph only: on a merged decoder it is not
    a candidate (it used to fail as 'the tool failed on this model'), nor the fix a finding
    proposes; static QDQ cannot enter the If either. What is measured runs decode steps."""
    with pytest.raises(ortlab.OrtlabError, match="main graph only"):
        ortlab.transformer_optimize(HERE / "optimum_gpt2_merged")
    d = ortlab.doctor(HERE / "optimum_gpt2_merged", budget_s=40, progress=False)
    text = d.to_text()
    assert "transformers" not in " ".join(m.key for m in d.measured)
    assert not [f for f in d.findings if "fails" in f.title]
    assert "transformer_optimize(model)" not in text
    assert "past_key_values" in d.feeds or "[1, 129]" in d.feeds


@pytest.mark.parametrize("name", ["genai_int4", "optimum_llama"])
def test_the_profile_splits_into_prefill_and_decode_and_layers(name: str) -> None:
    """Three profiled generations then six prefills alone: step 0 of each generation and the
    six are the prefill, the rest decode; each
    phase's node times (each node's median over the phase's steps) add up to about its
    profiled run time (the median) less the gaps between nodes (the profiler's per-node
    overhead each, within twice its measured figure); nodes group into the decoder's own
    layers, read from the graph's structure; the attention of layer k (so named by its
    exporter) is in layer k."""
    from ortlab.core.machine import BUSY_CORES
    from ortlab.core.runtime import PROFILER_US_PER_NODE

    g = ortlab.generate(HERE / name, prompt=8, new_tokens=5, runs=2, progress=False)
    d = ortlab.load(HERE / name).decoder
    assert d is not None and g.profiled_steps == 5
    assert g.profiled_reps == 3
    assert g.profile is not None and len(g.profile.run_us) == 5 * 3 + g.first_steps
    assert g.first_steps == 6
    t = g.by_phase()
    run = g.phase_run_us()
    load = g.profile.other_cores
    busy = load is not None and load > BUSY_CORES  # a stall between nodes: a gap, not a node
    for phase in ("prefill", "decode"):
        rows = t[t["phase"] == phase]
        nodes = float(rows["us_per_step"].sum())
        assert rows["share"].sum() == pytest.approx(1.0)
        assert nodes <= 1.1 * run[phase] + 1.0  # a sum of medians, against the median sum
        if not busy:  # on an idle machine the gaps are the profiler's per-node overhead
            assert run[phase] - nodes <= 2 * PROFILER_US_PER_NODE * len(rows) + 50.0, (phase, nodes)
    if busy:  # on a busy one the result says the load its times were measured under
        assert any("other processes used" in n for n in g.notes), g.notes
    layers = g.by_layer()
    assert set(layers["layer"]) == {-1, *range(d.layers)}
    attn = t[t["op_type"].isin(["GroupQueryAttention", "Softmax"])]
    for row in attn.itertuples():
        assert f"layers.{row.layer}" in row.node
    assert list(dict.fromkeys(layers["phase"])) == ["prefill", "decode"]
    assert "Per layer" in g.to_text() and ortlab.GenerationResult.from_json(g.to_json()) == g


def test_the_roofline_per_phase_counts_each_weight_multiplication_by_hand() -> None:
    """Each MatMulNBits of the int4 decoder, per phase: FLOPs 2·M·N·K and bytes read (the
    packed weights, scales and zero points as the file stores them, the activations) plus
    written, hand-counted from the model's initializers at M = prompt (prefill) and M = 1
    (decode); its time is the one by_phase shows; its FLOP/s ceiling is the GEMM peak at its
    precision (int8 at accuracy_level 4), DRAM's in the table beside the ceiling it meets; a
    decode step's weight multiplication is bandwidth-bound."""
    import onnx
    from onnx import numpy_helper

    prompt, new = 12, 6
    g = ortlab.generate(HERE / "genai_int4", prompt=prompt, new_tokens=new, runs=1, progress=False)
    proto = onnx.load(str(ortlab.load(HERE / "genai_int4").path))
    sizes = {i.name: numpy_helper.to_array(i).nbytes for i in proto.graph.initializer}
    nbits = {n.name: n for n in proto.graph.node if n.op_type == "MatMulNBits"}
    table, phases = g.phase_roofline, g.by_phase()
    assert [r.phase for r in g.roofs] == ["prefill", "decode"]
    assert g.roofs[1].past == prompt + (new - 2) // 2
    peaks = {p.dtype: p.best for p in g.peaks}
    for row in table[table["op_type"] == "MatMulNBits"].itertuples():
        node = nbits[row.node]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        n, k = attrs["N"], attrs["K"]
        m = prompt if row.phase == "prefill" else 1
        weights = sum(sizes[i] for i in node.input[1:] if i)
        assert row.flops == 2 * m * n * k, row.node
        assert row.bytes == weights + 4 * m * k + 4 * m * n, row.node
        same = phases[(phases["phase"] == row.phase) & (phases["node"] == row.node)]
        assert row.us_per_step == float(same["us_per_step"].iloc[0])
        precision = "int8" if attrs.get("accuracy_level") == 4 else "fp32"
        assert row.peak_flops == peaks[precision]
        assert row.dram_fraction == pytest.approx(
            row.bytes / row.us_per_step * 1e6 / peaks["memory"]
        )
        if row.phase == "decode":
            assert row.bound == "memory", row
    assert set(table[table["op_type"] == "MatMulNBits"]["node"]) == set(nbits)
    for w in g.weights.itertuples():  # per phase: the nodes' work over their summed time
        rows = table[(table["phase"] == w.phase) & (table["op_type"] == w.op_type)]
        assert w.nodes == len(rows) and w.us_per_step == pytest.approx(rows["us_per_step"].sum())
        moved = rows["bytes"].sum()
        # a step's weights in the nearest cache level they fit: its ceiling (or one further out)
        lookup = g.ceilings()
        fit = [v.name for v in g.levels if moved <= lookup.capacity(v)]
        assert w.bandwidth == max([peaks["memory"], *(peaks[n] for n in fit)])
        assert w.dram_fraction == pytest.approx(moved / w.us_per_step * 1e6 / peaks["memory"])
        rate = moved / w.us_per_step * 1e6 / w.bandwidth
        if w.phase == "prefill":
            rate = rows["flops"].sum() / w.us_per_step * 1e6 / w.peak_flops
        assert w.fraction == pytest.approx(rate)
    assert "Weight multiplications against this machine's ceilings" in g.to_text()
    decode = g.roofline("decode")
    assert {r.node for r in decode.rows} <= set(phases[phases["phase"] == "decode"]["node"])
    assert "decode" in repr(decode)
    with pytest.raises(KeyError, match="prefill, decode"):
        g.roofline("verify")
    assert ortlab.GenerationResult.from_json(g.to_json()) == g


def test_weight_multiplications_are_those_with_a_weight() -> None:
    """GPT-2 (optimum, merged): per layer its 4 Conv1D projections (Gemm) and the tied
    lm_head MatMul multiply by a weight; the attention's Q·Kᵀ and scores·V MatMuls, two
    activations, are not weight multiplications, in either branch of the If."""
    g = ortlab.generate(
        HERE / "optimum_gpt2_merged", prompt=8, new_tokens=3, runs=1, progress=False
    )
    for phase in ("prefill", "decode"):
        rows = g.phase_roofline[g.phase_roofline["phase"] == phase]
        assert (rows["op_type"] == "Gemm").sum() == 4 * 2, rows
        matmuls = rows[rows["op_type"] == "MatMul"]["node"].tolist()
        assert len(matmuls) == 1 and "lm_head" in matmuls[0], matmuls
        every = g.by_phase()
        attention = every[(every["phase"] == phase) & every["node"].str.contains("attn/MatMul")]
        assert len(attention) >= 4 and not set(attention["node"]) & set(rows["node"])


@pytest.mark.parametrize("name", ["genai_int4", "genai_fp32"])
def test_a_shared_buffer_as_genai_config_asks_gives_the_same_tokens(name: str) -> None:
    """genai_config asks for past_present_share_buffer: by default ortlab binds one
    max-length buffer per pair as past and present (IOBinding) and GroupQueryAttention writes
    in place; the tokens equal the copying loop's and genai's, and the buffers are the
    formula's bytes per token times the max length."""
    d = ortlab.load(HERE / name).decoder
    assert d is not None and d.share_buffer and d.max_length
    want = REFERENCE["models"][name]["genai_greedy_tokens"]
    g = ortlab.generate(
        HERE / name, feeds={"input_ids": PROMPT}, new_tokens=len(want), runs=2, progress=False
    )
    assert g.shared_buffer == d.max_length and g.tokens == want
    kv = g.kv_cache
    assert kv["measured_peak_bytes"] == kv["bytes_per_token"] * d.max_length
    assert math.isnan(kv["measured_bytes_per_token"]) and "written in place" in g.to_text()
    with pytest.raises(FeedError, match="cannot write its cache in place"):
        ortlab.generate(HERE / "optimum_llama", new_tokens=2, share_buffer=True, progress=False)


def test_the_decoders_are_bundled_examples(capsys: Any) -> None:
    """The folders ship in the package as ortlab.examples' tiny_* models (a workshop needs no
    download), loaded in place with their configs; the CLI takes their names."""
    from ortlab.engine.examples import DECODERS

    for name, (folder, _) in DECODERS.items():
        m = ortlab.examples.load(name)
        assert m.path.parent == HERE / folder and m.decoder is not None and m.name == name
        assert name in ortlab.examples.names()
    assert main(["generate", "tiny_llama_int4", "--prompt", "4", "--new", "2", "--json"]) == 0
    assert len(ortlab.GenerationResult.from_json(capsys.readouterr().out).tokens) == 2


def test_a_decoders_lab_has_a_generate_tab() -> None:
    """A decoder's Lab runs its first run at a valid decode step and has a Generate tab: the
    prompt and new-token boxes drive ortlab.generate at the Lab's settings; the tab shows the
    time-per-token figure and the result (TTFT, tokens/s, the phase x layer table). Other
    models' Labs have no such tab."""
    lab = ortlab.Lab(ortlab.examples.load("tiny_llama_int4"), synchronous=True, runs=5)
    assert lab.error.value == "" and "Generate" in lab.panes
    assert "[1, 129]" in lab.benchmark_result.feeds  # one decode step after 128 cached
    lab.gen_prompt.value, lab.gen_new.value = 8, 4
    lab.gen_button.click()
    g = lab.generation
    assert isinstance(g, ortlab.GenerationResult) and len(g.tokens) == 4 and g.prompt == 8
    shown = lab.shown["Generate"]
    assert shown[-1] is g and "Per layer" in g._repr_html_()
    # the slowest nodes of each phase, as by_phase() has them; one picked is selected in the graph
    picker = lab.tab_controls.gen_nodes
    assert picker in shown
    t = g.by_phase()
    decode = [v for _, v in picker.options if v.startswith("decode\t")]
    slowest = t[t["phase"] == "decode"]["node"].iloc[0]
    assert decode[0] == f"decode\t{slowest}"
    picker.value = decode[0]
    assert lab.graph.selected["name"] == slowest
    assert list(lab.panes)[lab.tabs.selected_index] == "Graph"
    assert "Generate" not in ortlab.Lab(ortlab.examples.load("mlp"), synchronous=True).panes


def test_a_merged_decoders_generate_tab_picks_the_branch_that_ran() -> None:
    """optimum's merged GPT-2 repeats each node name in both branches of its If: a prefill
    row picked selects the node in the branch without a past (else_branch), a decode row its
    twin in the branch with one (then_branch) — read from the graph's own groups."""
    lab = ortlab.Lab(ortlab.examples.load("tiny_gpt2_merged"), synchronous=True, runs=3)
    lab.gen_prompt.value, lab.gen_new.value = 6, 3
    lab.gen_button.click()
    picker = lab.tab_controls.gen_nodes
    groups = {n.name: n.group for n in lab.graph.graph_data.nodes}
    for phase, branch in (("prefill", "else_branch"), ("decode", "then_branch")):
        rows = [v for _, v in picker.options if v.startswith(phase) and "/transformer/" in v]
        assert rows, picker.options
        picker.value = rows[0]
        chosen = lab.graph.selected["name"]
        assert chosen.split("#")[0] == rows[0].split("\t")[1]
        assert f"▸ {branch}" in groups[chosen], (phase, chosen, groups[chosen])


def test_the_report_has_a_generation_section_and_says_what_the_model_is() -> None:
    """The report takes a generation like the Limits results: its own section (the headline
    and the per-layer table, the time-per-token figure); the model's one line is in it."""
    from ortlab.views.report import SECTION_TITLES, report_html

    m = ortlab.examples.load("tiny_llama_int4")
    g = ortlab.generate(m, prompt=8, new_tokens=4, runs=2, progress=False)
    html = report_html(m, extra=[g])
    assert SECTION_TITLES["GenerationResult"] in html and "Per layer" in html
    summary = html[html.index("Summary") :]
    assert summary.index("<b>What it is</b>: decoder with KV cache: 2 layers") < 2000
    # one headline for a decoder: the Summary's Generation line is the result's own, and the
    # figures in it are the section's table's
    from ortlab.views.generate import generation_headline

    line = generation_headline(g)
    assert f"<b>Generation</b>: {line}".replace("'", "&#x27;") in html
    ttft = fmt_interval(*g.ttft_ms)  # THE interval format (core.units), in both
    assert ttft in line and ttft in g.to_text()


def test_a_decoders_report_has_its_generation_by_default(tmp_path: Path) -> None:
    """ortlab.report on a decoder measures a generation when none is given (or reuses the
    doctor's baseline): its section and the Summary's headline, with no extra=[...]."""
    from ortlab.analysis.reportdata import GENERATION

    m = ortlab.examples.load("tiny_llama_int4")
    out = ortlab.report(m, path=tmp_path / "r.html", levels=("disabled", "all"))
    html = out.read_text(encoding="utf-8")
    assert "<b>Generation</b>: TTFT " in html and "Per layer" in html
    assert f"prompt {GENERATION[0]}, {GENERATION[1]} new tokens" in html
    assert html.index("<b>Generation</b>") < html.index("Per layer")


@pytest.mark.slow
def test_a_generations_worker_stays_near_one_session_and_its_cache() -> None:
    """A 64-token generation in a fresh worker (onnxruntime imported first): the worker's peak
    resident memory (VmHWM, read from /proc) grows by less than 2x one session's peak as
    ortlab.footprint measures it in fresh processes, plus the KV cache's measured peak; and
    three more generations on the same session raise that peak by less than the cache
    again (nothing is kept from one generation to the next)."""
    import psutil

    from ortlab.engine.worker import get_worker

    def peak(pid: int) -> int:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")

    m = ortlab.load(HERE / "genai_fp32")
    session = ortlab.footprint(m, settings={}, repeats=2, progress=False).reference.peak
    get_worker().stop()
    worker = get_worker()
    ortlab.benchmark(ortlab.examples.load("mlp"), runs=2, progress=False)  # imports onnxruntime
    pid = worker.pid
    assert pid is not None
    idle = psutil.Process(pid).memory_info().rss
    g = ortlab.generate(m, prompt=8, new_tokens=64, runs=1, profile=False, progress=False)
    first = peak(pid)
    kv = g.kv_cache["measured_peak_bytes"]  # genai's buffers: the formula x max length
    assert m.decoder is not None and kv == g.kv_bytes_per_token * m.decoder.max_length
    assert first - idle < 2 * session + kv, (first - idle, session, kv)
    ortlab.generate(m, prompt=8, new_tokens=64, runs=3, profile=False, progress=False)
    assert peak(pid) - first < max(kv, 1 << 20), (peak(pid) - first, kv)


def test_a_decoders_cold_lab_leads_with_a_short_generation() -> None:
    """A decoder's Lab ends its first run with a short generation (profiling off, said): the
    Overview leads with its TTFT and tokens/s, the one headline the Generate tab opens on
    too; pressing Generate replaces it (and the Overview says whose it is). A model that is
    no decoder gets none."""
    from ortlab.views.generate import generation_headline
    from ortlab.views.lab.tabjobs import OPENING

    lab = ortlab.Lab(ortlab.examples.load("tiny_llama_int4"), sync=True, runs=3)
    g = lab.generation
    assert g is not None and (g.prompt, g.new_tokens) == OPENING and g.profile is None
    html = lab.overview()[0]._repr_html_()
    line = esc(generation_headline(g), 600)
    assert line in html and "a short generation run on opening" in html
    assert html.index("<b>Generation</b>") < html.index("<b>Latency</b>")
    shown = lab.shown["Generate"]
    assert g in shown and any(line in getattr(x, "value", "") for x in shown)
    said = " ".join(str(getattr(x, "value", "")) for x in shown)
    assert f"A short generation run on opening (prompt {OPENING[0]}, {OPENING[1]} new" in said
    lab.tab_controls.gen_prompt.value, lab.tab_controls.gen_new.value = 8, 4
    lab.gen_button.click()
    assert lab.generation is not None and lab.generation is not g
    html = lab.overview()[0]._repr_html_()
    assert "the Generate tab&#x27;s last run" in html and "on opening" not in html
    lab.run()  # a later run keeps the tab's generation
    assert lab.generation is not None and lab.generation.new_tokens == 4
    plain = ortlab.Lab(ortlab.examples.load("mlp"), sync=True, runs=3)
    assert plain.generation is None and "<b>Generation</b>" not in plain.overview()[0]._repr_html_()
