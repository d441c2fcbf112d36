"""The doctor on an LLM decoder (:attr:`Model.decoder`): what a decoder user can change,
measured as the model is run — a prefill, then token by token with the KV cache — in greedy
generations interleaved with the baseline's (A B, B A, …), not in one run.

The candidates: intra-op threads and spinning (decode steps are short: a spinning pool or too
many threads cost more than the work), the KV cache written in place or copied each step (where
the model can do both), and, from an fp32 decoder, int4 weight-only variants at two block sizes
with MatMulNBits computing in int8 (``accuracy_level=4``). A variant that cannot apply (int4 of
an int4 model, weights inside an If's branches) is never a candidate: a note says why.

Each candidate gets a decode verdict (time per token) and a TTFT verdict (the prefill), each
with its interval over rounds; a variant also says how many of the baseline's greedy tokens it
reproduces (from the first: greedy decoding diverges for good at the first different token).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ortlab.analysis.generation.generate import GenerationResult, generate_run
from ortlab.analysis.generation.phases import decode_past
from ortlab.analysis.generation.quality import kl_divergence_run
from ortlab.analysis.generation.seq2seq import encoder_part, start_ids, with_ids
from ortlab.analysis.quantization.quantize import quantize
from ortlab.core.config import SessionConfig
from ortlab.core.decoder import DecoderInfo
from ortlab.core.machine import thread_counts
from ortlab.core.model import Model
from ortlab.core.onnx_util import compute_in_bodies
from ortlab.core.quantconfig import QuantConfig
from ortlab.core.run import Run
from ortlab.core.runtime import TIMED_SPIN_US, timed_spin
from ortlab.core.stats import MIN_ROUNDS, Paired, paired_ratio
from ortlab.core.units import fmt_ms
from ortlab.diagnosis.budget import StageBudget
from ortlab.diagnosis.facts import CandidateFailure, Facts, Kind, candidate_key
from ortlab.diagnosis.generationfacts import GenerationFacts, GenerationTrial
from ortlab.diagnosis.outcome import Outcome, outcome
from ortlab.diagnosis.rules_decoder import TTFT_FLOOR_MS
from ortlab.diagnosis.rules_resources import config_args
from ortlab.engine import tasks_generate
from ortlab.engine.calls import run_model_task

if TYPE_CHECKING:
    from ortlab.engine.replies import GenerationPair

__all__ = [
    "baseline_generation",
    "best_in_generation",
    "generation_stage",
    "generation_step",
    "generations",
]

SHARE = 0.4
"""Of the budget left when the stage starts: what the generations may take."""


@dataclass(frozen=True)
class _Spec:
    key: str
    label: str
    config: SessionConfig
    shared: int
    code: str
    build: Callable[[], Model] | None = None
    """A variant's maker (None: the baseline's model under other settings)."""


def _sizes(info: DecoderInfo) -> tuple[int, int]:
    """The prompt and new tokens the stage generates: a short chat turn, within the model (an
    encoder-decoder's decoder starts from its folder's start ids)."""
    longest = info.max_length or 4096
    prompt = max(1, min(64, longest // 4))
    if info.seq2seq:
        prompt = max(1, len(info.decoder_start))
    return prompt, max(2, min(32, longest - prompt))


def decoder_specs(
    m: Model, info: DecoderInfo, cfg: SessionConfig, *, cores: int, logical: int, shared: int
) -> tuple[list[_Spec], list[str]]:
    """The candidates worth generating with, most likely to matter first, and notes on what
    does not apply."""
    out: list[_Spec] = []
    notes: list[str] = []
    if cfg.allow_spinning is not False:
        spin = cfg.with_(allow_spinning=False)
        out.append(
            _Spec(
                candidate_key(Kind.SPIN, "off"),
                "spinning off",
                spin,
                shared,
                f"SessionConfig({config_args(spin, cfg)})",
            )
        )
    timed = timed_spin(cfg)
    if timed is not None:
        out.append(
            _Spec(
                candidate_key(Kind.SPIN, f"{TIMED_SPIN_US}us"),
                timed.spinning(),
                timed,
                shared,
                f"SessionConfig({config_args(timed, cfg)})",
            )
        )
    for n in thread_counts(cores, logical):
        if n != cfg.intra_op_threads:
            c = cfg.with_(intra_op_threads=n)
            out.append(
                _Spec(
                    candidate_key(Kind.THREADS, str(n)),
                    f"intra_op_threads={n}",
                    c,
                    shared,
                    f"SessionConfig({config_args(c, cfg)})",
                )
            )
    if info.can_share_buffer:
        flip = info.shared_buffer(asked=not shared)
        out.append(
            _Spec(
                candidate_key(Kind.SHARE_BUFFER, "on" if flip else "off"),
                "KV cache written in place (one buffer per pair)"
                if flip
                else "KV cache copied from present to past each step",
                cfg,
                flip,
                f"ortlab.generate(model, share_buffer={bool(flip)})",
            )
        )
    if info.weight_format.kind == "fp32" and not compute_in_bodies(m.proto.graph):
        for block in (32, 128):
            qc = QuantConfig(mode="int4", block_size=block, accuracy_level=4)
            out.append(
                _Spec(
                    candidate_key(Kind.VARIANT, f"int4-b{block}"),
                    f"int4 weight-only, block {block}, int8 compute (accuracy_level 4)",
                    cfg,
                    shared,
                    f"ortlab.quantize(model, mode='int4', block_size={block}, accuracy_level=4)",
                    build=functools.partial(quantize, m, qc),
                )
            )
    elif info.weight_format.kind == "fp32":
        notes.append(
            "No int4 variant: this decoder's weight multiplications sit inside an If's branches "
            "(an optimum merged export), which ORT's int4 quantizer does not rewrite; export "
            "without the merge (or with onnxruntime-genai's builder) to quantize it."
        )
    else:
        notes.append(
            f"No int4 variant: the weights are {info.weights} already; block size and "
            "accuracy level are chosen when quantizing from the fp32 model "
            "(ortlab.quantize(fp32_model, mode='int4', block_size=…, accuracy_level=4))."
        )
    return out, notes


def generation_stage(
    run: Run,
    budget: StageBudget,
    facts: Facts,
    *,
    logical: int,
    base: GenerationResult | None = None,
) -> Outcome:
    """The generation stage: the facts with the decoder's :func:`generations` (``generation``)
    on ``logical`` CPUs, from ``base`` where the first stage generated it already."""
    made = generations(run, budget, cores=facts.seen.cores, logical=logical, base=base)
    return outcome(budget, dataclasses.replace(facts, generation=made))


def baseline_generation(run: Run, budget: StageBudget) -> GenerationResult | None:
    """The baseline's profiled generation (:func:`_sizes`' prompt and new tokens, 6 runs: the
    headline's interval needs 6), None when it failed (the failure says why). A decoder's
    step, where the doctor chooses it, is this generation's decode steps
    (:func:`generation_step`): one profile for both."""
    info = run.model.decoder
    assert info is not None, "a decoder's generation"
    prompt, new = _sizes(info)
    first = {"prompt": prompt, "past": 0, "batch": 1}
    return budget.guarded(
        "the baseline's generation",
        "generation",
        lambda: generate_run(
            run.derive(dims=first, runs=6, progress=False, timeout=budget.call_timeout()),
            new_tokens=new,
        ),
        f"ortlab.generate(model, prompt={prompt}, new_tokens={new})",
    )


def generation_step(run: Run, g: GenerationResult) -> Run:
    """``run`` at the decode step whose shapes are the mean of ``g``'s profiled decode steps
    (one token, :func:`decode_past` tokens cached): the step its decode profile and decode
    roofline describe, the one every candidate is then timed at."""
    past = decode_past(g.prompt, g.profiled_steps)
    step = run.derive(dims={"prompt": 1, "past": past, "batch": g.batch})
    return step.derive(inputs=step.inputs.said_as(_step_why(g)))


def _step_why(g: GenerationResult) -> str:
    """Why the doctor's decoder step has its dims, as the inputs say it."""
    last = g.prompt + g.profiled_steps - 2
    return f"the doctor's: its generation's mean decode step ({g.prompt} to {last} cached)"


def generations(
    run: Run,
    budget: StageBudget,
    *,
    cores: int,
    logical: int,
    base: GenerationResult | None = None,
) -> GenerationFacts | None:
    """The baseline's profiled generation (``base``, else generated here), then each candidate
    interleaved with it, within :data:`SHARE` of what is left of the budget; None when the
    model is not a decoder or the baseline could not generate (a failure says why)."""
    m, cfg = run.model, run.config
    info = m.decoder
    if info is None:
        return None
    prompt, new = _sizes(info)
    if base is None:
        base = baseline_generation(run, budget)
    if base is None:
        return None
    specs, notes = decoder_specs(
        m, info, cfg, cores=cores, logical=logical, shared=base.shared_buffer
    )
    one = _one_s(base)
    started = time.perf_counter()
    room = max(budget.left() * SHARE, 0.0)
    rounds = min(budget.max_rounds, int(room / max(len(specs), 1) / (2 * one)) - 1)
    if rounds < MIN_ROUNDS:
        fit = int(room / (2 * one * (MIN_ROUNDS + 1)))
        left_out = [s.label for s in specs[fit:]]
        if left_out:
            budget.skip(
                f"generation trials of {', '.join(left_out)}",
                budget.budget_s + len(left_out) * 2 * one * (MIN_ROUNDS + 1) / SHARE,
            )
        specs, rounds = specs[:fit], MIN_ROUNDS
    built: list[tuple[_Spec, Model]] = []
    for s in specs:
        if s.build is None:
            built.append((s, m))
            continue
        made = budget.guarded(f"the {s.label} variant", "build", s.build, s.code)
        if made is not None:
            built.append((s, made))
    trials, other = _pairs(
        run, budget, built, prompt=prompt, new=new, rounds=rounds, shared=base.shared_buffer
    )
    trials = _with_quality(run, budget, built, trials)
    notes.append(
        "Generation trials: "
        + (
            f"the encoder on synthetic inputs, then the decoder from its {prompt} start id(s)"
            if info.seq2seq
            else f"{prompt}-token prompt (synthetic ids)"
        )
        + f", {new} new tokens, "
        f"{rounds} rounds per candidate, each round one generation of the baseline and one of "
        f"the candidate in turn (A B, B A, …), {time.perf_counter() - started:.1f} s."
    )
    ttft, per_token, said = _baseline_times(trials, base)
    if ttft < TTFT_FLOOR_MS:
        notes.append(
            f"The prefill takes {fmt_ms(ttft)} here: thread wake-ups and cache state are a "
            "visible share of so short a step, so its TTFT verdicts describe this machine's "
            "scheduling as much as the model (none becomes a finding on its own)."
        )
    for note in notes:  # said once, with the other stages' notes
        budget.note(note)
    return GenerationFacts(
        prompt=prompt,
        new_tokens=new,
        rounds=rounds,
        baseline=base,
        trials=trials,
        other_cores=other,
        base_ttft_ms=ttft,
        base_decode_ms=per_token,
        measured=said,
    )


def _pairs(
    run: Run,
    budget: StageBudget,
    built: list[tuple[_Spec, Model]],
    *,
    prompt: int,
    new: int,
    rounds: int,
    shared: int,
) -> tuple[list[GenerationTrial], float | None]:
    """Each built candidate generating against the baseline (its ``shared`` cache), in pairs
    in the worker; a candidate that fails there is a failure, the others go on."""
    m = run.model
    assert m.decoder is not None
    if not built:
        return [], None
    run = run.derive(dims={"prompt": prompt, "past": 0, "batch": 1}, timeout=budget.call_timeout())
    encoder = None
    if m.decoder.seq2seq:  # the encoder first in each generation, from the start ids
        encoder = encoder_part(m, m.decoder, run.config, None, batch=1)
        run = with_ids(run, m.decoder, start_ids(m.decoder, None, 1), synthetic=True)
    reply = run_model_task(
        tasks_generate.interleaved,
        run,
        decoder=m.decoder,
        shared=shared,
        items=[(str(v.path), v.name, s.config, s.shared) for s, v in built],
        new_tokens=new,
        rounds=rounds,
        encoder=encoder.job if encoder else None,
    )
    trials = [
        _trial(s, v, pair, new, reply.other_cores)
        for (s, v), pair in zip(built, reply.pairs, strict=True)
        if pair is not None
    ]
    for k, why in reply.failed.items():
        spec = built[k][0]
        budget.failed(CandidateFailure(f"generation with {spec.label}", why, "timing", spec.code))
    return trials, reply.other_cores


KLD_TOKENS = 256
"""Teacher-forced positions a variant's next-token divergence is measured over."""


def _with_quality(
    run: Run, budget: StageBudget, built: list[tuple[_Spec, Model]], trials: list[GenerationTrial]
) -> list[GenerationTrial]:
    """Each variant's trial with its KL divergence from the baseline model (one task for all
    of them, within the budget); settings of the baseline's own model keep None."""
    m = run.model
    variants = {v.name: v for s, v in built if s.build is not None and v is not m}
    if not variants:
        return trials
    if m.decoder is not None and m.decoder.seq2seq:
        budget.note(
            "The variants' next-token divergence is measured on decoders alone (its "
            "teacher-forced stream has no encoder yet): an encoder-decoder's variant is "
            "generated and timed but not proposed (a variant is proposed only with its KLD)."
        )
        return trials
    got = budget.guarded(
        "the variants' next-token divergence",
        "accuracy",
        lambda: kl_divergence_run(
            run.derive(dims={"prompt": 1, "past": 0, "batch": 1}, timeout=budget.call_timeout()),
            list(variants.values()),
            length=KLD_TOKENS,
        ),
        f"ortlab.kl_divergence(model, variant, length={KLD_TOKENS})",
    )
    rows = {r.variant: r for r in got.rows} if got is not None else {}
    return [dataclasses.replace(t, quality=rows.get(t.variant)) for t in trials]


def best_in_generation(
    run: Run,
    budget: StageBudget,
    gen: GenerationFacts,
    best: tuple[Model, SessionConfig, str],
) -> GenerationFacts:
    """The search's best (verified on one decode step) generated against the baseline too, as
    the trial keyed ``best``, when the budget leaves it the stage's rounds; else a note."""
    model, config, label = best
    one = _one_s(gen.baseline)
    need = 2 * one * (gen.rounds + 1)
    if budget.left() < need:
        budget.skip("the best in generation", budget.budget_s + need)
        return gen
    spec = _Spec(
        "best", f"the best of the search ({label})", config, gen.baseline.shared_buffer, ""
    )
    got = budget.guarded(
        "the best in generation",
        "generation",
        lambda: _pairs(
            run,
            budget,
            [(spec, model)],
            prompt=gen.prompt,
            new=gen.new_tokens,
            rounds=gen.rounds,
            shared=gen.baseline.shared_buffer,
        ),
    )
    if got is None or not got[0]:
        return gen
    return dataclasses.replace(gen, trials=[*gen.trials, *got[0]])


def _one_s(base: GenerationResult) -> float:
    """Seconds one generation takes (the baseline's last, a warm one), for the budget."""
    return sum(base.steps_ms[-1]) / 1e3 + 0.01


def _baseline_times(
    trials: list[GenerationTrial], base: GenerationResult
) -> tuple[float, float, str]:
    """The baseline's TTFT and time per decode token (ms), and where they come from: every
    round it ran in the trials, else its own profiled-off generations."""
    if trials:
        ttft = float(np.median([x for t in trials for x in t.base_ttft_rounds]))
        per_token = float(np.median([x for t in trials for x in t.base_decode_rounds]))
        n = sum(len(t.base_ttft_rounds) for t in trials)
        return ttft, per_token, f"median of the baseline's {n} generations beside the candidates"
    per_token = float(np.median([sum(r[1:]) / max(len(r) - 1, 1) for r in base.steps_ms]))
    return base.ttft_ms[0], per_token, f"median of {base.runs} generations"


def _trial(
    s: _Spec, v: Model, pair: GenerationPair, new: int, busy: float | None
) -> GenerationTrial:
    per = max(new - 1, 1)
    base_dec = [t / per / 1e6 for t in pair.base_decode_ns]
    dec = [t / per / 1e6 for t in pair.decode_ns]
    base_ttft = [t / 1e6 for t in pair.base_prefill_ns]
    ttft = [t / 1e6 for t in pair.prefill_ns]
    dv = dataclasses.replace(paired_ratio(base_dec, dec), busy=busy)
    tv = dataclasses.replace(paired_ratio(base_ttft, ttft), busy=busy)
    kept = 0
    for a, b in zip(pair.base_tokens, pair.tokens, strict=False):
        if a != b:
            break
        kept += 1
    return GenerationTrial(
        key=s.key,
        label=s.label,
        variant=v.name,
        config=s.config,
        shared_buffer=s.shared,
        decode=Paired.of(dv, dv.text("the baseline", s.label) + " (time per decode token)"),
        ttft=Paired.of(tv, tv.text("the baseline", s.label) + " (time to first token)"),
        tokens_kept=kept,
        tokens=len(pair.base_tokens),
        code=s.code,
        decode_rounds=dec,
        ttft_rounds=ttft,
        base_decode_rounds=base_dec,
        base_ttft_rounds=base_ttft,
    )
