"""The doctor on LLM decoders (issue 39, item 5): by phase, with what a decoder user can change
measured in generation (decode tokens/s and TTFT, interleaved with the baseline), never a
variant that cannot apply. Checked against ortlab.generate run separately, the model's own
weights and the verdicts' own rounds."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

import ortlab
from ortlab.analysis.generation.phases import decode_past
from ortlab.analysis.generation.quality import KLDRow
from ortlab.analysis.generation.split import phase_runs
from ortlab.analysis.reportdata import DOCTORS_STEP, gather
from ortlab.core.stats import MIN_ROUNDS, Paired, paired_ratio
from ortlab.core.units import fmt_rate
from ortlab.diagnosis import search
from ortlab.diagnosis.facts import Facts
from ortlab.diagnosis.generationfacts import GenerationFacts, GenerationTrial
from ortlab.diagnosis.rules_decoder import decoder_phases, decoder_trials

HERE = Path(ortlab.__file__).parent / "decoders"


@pytest.fixture(scope="module")
def int4_doctor() -> ortlab.DoctorResult:
    """The doctor with the step profilers it no longer needs for a decoder made to fail: the
    decoder's step is profiled once, in its generation."""

    def again(*_: object, **__: object) -> None:
        raise AssertionError("the decoder's step was profiled a second time")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(search, "profile_with_roofline", again)
        mp.setattr(search, "placement_run", again)
        return ortlab.doctor(HERE / "genai_int4", budget_s=60, memory=False, progress=False)


@pytest.mark.slow
def test_a_decoders_step_is_profiled_once(int4_doctor: ortlab.DoctorResult) -> None:
    """The doctor's profile of a decoder is its baseline generation's decode steps: each
    node's time is the one by_phase shows, its median run the phase's, its roofline the
    generation's decode roofline, and every candidate is timed at that roofline's step (the
    mean of the profiled decode steps), said as the doctor's choice."""
    d = int4_doctor
    assert d.generation is not None and d.profile is not None and d.roofline is not None
    g = d.generation.baseline
    split = g.by_phase()
    decode = split[split["phase"] == "decode"].set_index("node")["us_per_step"]
    mine = d.profile.by_node().set_index("node")["us_per_run"]
    assert len(decode) and set(decode.index) == set(mine.index)
    for node, us in decode.items():
        assert mine[node] == us, node
    assert d.profile.data.run_us == [g.profile.run_us[k] for k in phase_runs(g.timeline)["decode"]]
    assert d.roofline.rows == g.roofline("decode").rows
    past = decode_past(g.prompt, g.profiled_steps)
    assert f"past={past} (the doctor's: its generation's mean decode step" in d.feeds
    assert d.roofline.feeds == f"one decode step, {past} tokens cached"
    assert any(f"with {past} tokens cached, the mean of the baseline" in n for n in d.notes)
    # a report of it measures its own sections at that step, said as the doctor's
    assert d.step == {"batch": 1, "prompt": 1, "past": past}
    got = gather(ortlab.load(HERE / "genai_int4"), d, levels=("disabled", "all"))
    for section in ("placement", "optimization"):
        said, synthetic = got.measured_here[section]
        assert f"past={past} ({DOCTORS_STEP})" in said and synthetic, section
    assert got.placement is not None and got.placement.profile is not None
    types = str(got.placement.profile.data.input_types)  # the cache fed: [1, 2 heads, past, 16]
    assert f"(1, 2, {past}, 16)" in types and "(1, 2, 128, 16)" not in types


@pytest.mark.slow
def test_a_decoders_doctor_measures_its_settings_in_generation(
    int4_doctor: ortlab.DoctorResult,
) -> None:
    """genai's int4 decoder: spinning, the thread counts and the KV cache's buffer sharing
    are each generated with, interleaved with the baseline, for a verdict's rounds; settings
    leave the greedy tokens as they are (the same tokens ortlab.generate makes on its own with
    the cache copied); no int8 or int4 variant of an int4 model is proposed."""
    d = int4_doctor
    gen = d.generation
    assert gen is not None and gen.rounds >= MIN_ROUNDS
    keys = {t.key for t in gen.trials}
    assert {"share-buffer:off", "threads:1"} <= keys, keys
    copied = ortlab.generate(
        HERE / "genai_int4",
        prompt=gen.prompt,
        new_tokens=gen.new_tokens,
        runs=1,
        profile=False,
        share_buffer=False,
        progress=False,
    )
    for t in gen.trials:
        assert t.decode.rounds == t.ttft.rounds == gen.rounds
        assert len(t.base_decode_rounds) == gen.rounds
        assert t.tokens_kept == t.tokens == gen.new_tokens, t.key  # settings keep the text
        assert not t.key.startswith("variant:")
    assert gen.baseline.tokens == copied.tokens  # the in-place cache's tokens, independently
    assert not any("int8" in m.key or "quant" in m.key for m in d.measured)
    assert any("No int4 variant: the weights are int4" in n for n in d.notes)
    table = d.generation_trials()
    assert list(table["key"]) == [t.key for t in gen.trials]
    first = gen.trials[0]  # each ratio spread as every table spreads one, prefixed
    row = table.iloc[0]
    assert (row["decode_ratio"], row["decode_ratio_low"], row["decode_ratio_high"]) == (
        first.decode.ratio,
        first.decode.low,
        first.decode.high,
    )
    assert row["ttft_verdict"] == first.ttft.verdict and "ttft_ratio_low" in table


@pytest.mark.slow
def test_a_decoders_doctor_says_where_a_generation_goes(int4_doctor: ortlab.DoctorResult) -> None:
    """The phase finding's numbers are the stage's own: the decode share of the generation
    from the baseline's TTFT and time per token, the tokens/s from the same, and the
    weight multiplications' bandwidth from the profiled generation's roofline per phase."""
    d = int4_doctor
    gen = d.generation
    assert gen is not None
    f = next(x for x in d.findings if x.rule == "decoder_phases")
    decode = gen.base_decode_ms * (gen.new_tokens - 1)
    share = decode / (decode + gen.base_ttft_ms)
    assert f.title.startswith(f"Decode is {share:.0%} of generating {gen.new_tokens} tokens")
    assert fmt_rate(1e3 / gen.base_decode_ms, "tokens/s") in f.evidence
    decode_row = gen.baseline.weights.query("phase == 'decode'").iloc[0]
    assert f"{decode_row.fraction:.0%} of" in f.evidence and "MatMulNBits" in f.evidence
    text = d.to_text()
    assert "Measured in generation" in text and "KV cache copied" in text
    assert ortlab.DoctorResult.from_json(d.to_json()).generation == gen


@pytest.mark.slow
def test_an_fp32_decoders_doctor_tries_int4_and_a_merged_one_says_why_not() -> None:
    """From genai's fp32 decoder the doctor builds int4 weight-only variants at block 32 and
    128 with int8 compute (their MatMulNBits carry those attributes, read from the built
    files) and generates with them, saying how many greedy tokens each keeps; optimum's
    merged GPT-2 keeps its weights inside the If, which the int4 quantizer cannot rewrite:
    no int4 candidate, a note says why."""
    import onnx

    d = ortlab.doctor(HERE / "genai_fp32", budget_s=90, memory=False, progress=False)
    gen = d.generation
    assert gen is not None
    found = {t.key: t for t in gen.trials}
    assert {"variant:int4-b32", "variant:int4-b128"} <= set(found), set(found)
    if d.best.key not in ("", "baseline"):
        # one story: the best, verified on one decode step, was generated with too, and its
        # verdict says how it did there
        (mine,) = [t for t in gen.trials if t.key == "best"]
        assert mine.config == d.best.config and mine.decode.rounds == gen.rounds
        from ortlab.views.doctor import best_verdict

        assert d.best.generation == mine.decode  # data: the view composes the sentence
        assert best_verdict(d.best).startswith(f"in generation: {mine.decode.verdict}; ")
        assert best_verdict(d.best) in d.to_text()
    for block in (32, 128):
        t = found[f"variant:int4-b{block}"]
        assert 0 <= t.tokens_kept <= t.tokens
        # its divergence from the fp32 model, as ortlab.kl_divergence measures it (checked
        # against plain onnxruntime in test_kld.py), shown beside its speed
        assert t.quality is not None and len(t.quality.kl) == 256
        assert t.quality.mean > 0 and 0 <= t.quality.top1 <= 1
        built = ortlab.quantize(
            HERE / "genai_fp32", mode="int4", block_size=block, accuracy_level=4
        )
        assert built.name == t.variant
        attrs = [
            {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            for n in built.proto.graph.node
            if n.op_type == "MatMulNBits"
        ]
        assert attrs and all(a["block_size"] == block and a["accuracy_level"] == 4 for a in attrs)
    merged = ortlab.doctor(HERE / "optimum_gpt2_merged", budget_s=40, memory=False, progress=False)
    assert merged.generation is not None
    assert not any(t.key.startswith("variant:int4") for t in merged.generation.trials)
    assert any("inside an If's branches" in n for n in merged.notes)


def _trial(
    decode: float,
    *,
    kept: int,
    tokens: int = 16,
    ttft: float = 1.0,
    base_ttft: float = 1.0,
    variant: str = "genai_int4",
) -> GenerationTrial:
    """A trial whose 8 rounds give decode ratio ``decode`` and TTFT ratio ``ttft`` (± 1 %)."""
    base = [1.0] * 8
    cand = [decode * (1 + 0.01 * ((-1) ** k)) for k in range(8)]
    first = [ttft * (1 + 0.01 * ((-1) ** k)) for k in range(8)]
    dv, tv = paired_ratio(base, cand), paired_ratio(base, first)
    return GenerationTrial(
        key="spin:off",
        label="spinning off",
        variant=variant,
        config=ortlab.SessionConfig(allow_spinning=False),
        shared_buffer=0,
        decode=Paired.of(dv, dv.text("the baseline", "spinning off")),
        ttft=Paired.of(tv, tv.text("the baseline", "spinning off")),
        tokens_kept=kept,
        tokens=tokens,
        code="SessionConfig(allow_spinning=False)",
        decode_rounds=cand,
        ttft_rounds=[base_ttft * x for x in first],
        base_ttft_rounds=[base_ttft] * 8,
        base_decode_rounds=base,
    )


@pytest.mark.slow  # its fixture: a whole doctor of a decoder (12 s)
def test_the_decoder_rules_find_a_faster_decode_and_a_changed_text(
    int4_doctor: ortlab.DoctorResult,
) -> None:
    """A trial significantly faster in decode is a finding quoting its own verdict and the
    milliseconds a generation saves; one that changes the greedy text says from which token
    and is only 'info'; one within noise is no finding."""
    gen = int4_doctor.generation
    assert gen is not None
    facts = Facts(seen=None)  # type: ignore[arg-type]  # the rules read generation only
    for decode, kept, want in ((0.5, 16, "warning"), (0.5, 3, "info"), (1.0, 16, None)):
        trial = _trial(decode, kept=kept)
        g = dataclasses.replace(gen, trials=[trial], new_tokens=17)
        found = decoder_trials(dataclasses.replace(facts, generation=g))
        if want is None:
            assert found == []
            continue
        (f,) = found
        assert (
            f.severity == want and f.ratio == trial.decode.ratio and f.gain == trial.decode.verdict
        )
        assert f.title.startswith("spinning off: decode 2.00x faster in generation")
        assert f.saved_ms == pytest.approx((1.0 - trial.decode_ms) * 16)
        if kept < 16:
            assert f"changes the generated text from token {kept + 1} of 16" in f.evidence
    # a faster prefill alone: a finding when the prefill takes a millisecond or more, not when
    # it is a sub-millisecond step that thread wake-ups move
    for base_ttft, found in ((5.0, 1), (0.2, 0)):
        g = dataclasses.replace(gen, trials=[_trial(1.0, kept=16, ttft=0.5, base_ttft=base_ttft)])
        out = decoder_trials(dataclasses.replace(facts, generation=g))
        assert len(out) == found and all("time to first token 2.00x" in f.title for f in out)
    # a variant of another model is proposed only with its divergence from the model shown
    other = _trial(0.5, kept=16, variant="genai_int4_int4")
    g = dataclasses.replace(gen, trials=[other], new_tokens=17)
    assert decoder_trials(dataclasses.replace(facts, generation=g)) == []
    row = KLDRow("genai_int4_int4", [0.01, 0.03, 0.02], [True, True, False])
    g = dataclasses.replace(gen, trials=[dataclasses.replace(other, quality=row)], new_tokens=17)
    (f,) = decoder_trials(dataclasses.replace(facts, generation=g))
    assert row.sentence() in f.evidence and "top-1 agreement 66.7%" in f.evidence
    assert decoder_phases(dataclasses.replace(facts, generation=None)) == []
    assert math.isfinite(gen.base_decode_ms) and isinstance(gen, GenerationFacts)


@pytest.mark.slow
@pytest.mark.parametrize("folder", ["genai_gemma2_int4", "genai_lfm2_int4", "genai_gptoss_fp32"])
def test_the_doctor_generates_with_the_decoders_that_carry_other_state(folder: str) -> None:
    """Windowed caches (Gemma 2), convolution states (LFM2), experts and windows (gpt-oss):
    the doctor runs with its settings measured in generation, and its
    baseline's tokens are those ortlab.generate makes on its own with the cache copied (a
    fixed window buffer and carried states included); settings keep the text."""
    d = ortlab.doctor(HERE / folder, budget_s=60, memory=False, progress=False)
    gen = d.generation
    assert gen is not None and gen.trials, d.notes
    copied = ortlab.generate(
        HERE / folder,
        prompt=gen.prompt,
        new_tokens=gen.new_tokens,
        runs=1,
        profile=False,
        share_buffer=False,
        progress=False,
    )
    assert gen.baseline.tokens == copied.tokens
    for t in gen.trials:  # settings keep the text; a variant (int4 of fp32) says what it kept
        assert t.tokens == gen.new_tokens and 0 <= t.tokens_kept <= t.tokens, t.key
        if not t.key.startswith("variant:"):
            assert t.tokens_kept == t.tokens, t.key


@pytest.mark.slow
def test_a_decoder_that_cannot_generate_is_still_profiled_at_a_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The baseline's generation fails (as a cache layout ortlab cannot drive would): the
    failure is a finding, the generation is not tried a second time, and the doctor profiles
    and times its own guessed decode step instead, as for any model."""
    from ortlab.core.errors import RunError
    from ortlab.diagnosis import generation

    calls = []

    def fails(*args: object, **_: object) -> None:
        calls.append(args)
        raise RunError("the cache cannot be driven (planted)")

    monkeypatch.setattr(generation, "generate_run", fails)
    d = ortlab.doctor(
        HERE / "genai_int4", budget_s=20, memory=False, quantize=False, progress=False
    )
    assert len(calls) == 1 and d.generation is None
    failed = [f for f in d.findings if "the baseline's generation" in f.title + f.evidence]
    assert failed and "planted" in failed[0].evidence
    assert d.profile is not None and d.profile.runs == 5  # observe's own step profile
    assert "past=128 (guessed" in d.feeds or "past_sequence_length=128" in d.feeds
