"""The doctor's search stages, each a function ``stage(run, budget, facts) -> Outcome``
(:mod:`ortlab.diagnosis.outcome`): observe the session, build candidate fixes, time them
interleaved with the baseline (screen, prune, measure survivors), score the variants' accuracy
and fix the inaccurate int8 ones, explain the slower variants; the final combination is
:mod:`ortlab.diagnosis.verify`'s. Each reads the facts so far, frozen, and returns them with
what it measured; ``doctor()`` folds the outcomes in order.

Stages, each in the worker and each bounded by the budget:

1. observe: profile the baseline (op time shares, profiler overhead), placement when an
   accelerator EP loaded;
2. candidates (:mod:`ortlab.diagnosis.candidates`): settings worth timing and model variants
   worth building;
3. screen: 6 interleaved rounds of everything (the fewest a 95 % interval needs, see
   :data:`ortlab.core.stats.MIN_ROUNDS`); candidates whose whole interval is slower than the noise
   band are pruned; the survivors get more rounds (paired per round, so rounds from both calls
   pool);
4. combine (:mod:`ortlab.diagnosis.verify`): the fastest significant setting per dimension
   plus the best accurate variant, timed again against the baseline with the two best single
   changes.

A candidate that fails — its variant cannot be built (ORT's quantizer raises ``ValueError``,
``AssertionError``…), its session cannot be built or its first run fails in the worker — is
recorded as a :class:`~ortlab.diagnosis.facts.CandidateFailure` (a finding) and left out; the
others go on.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ortlab.analysis.generation.result import GenerationResult
from ortlab.analysis.limits.roofline import profile_with_roofline
from ortlab.analysis.memory import footprint_run, memory_settings
from ortlab.analysis.optimizers.levels import initializer_input_blocker
from ortlab.analysis.placement.measure import placement_run
from ortlab.analysis.placement.whatif import unconfigured, whatif_run
from ortlab.analysis.placement.whatifresult import DEFAULT_TARGETS, TARGETS, WhatIfResult
from ortlab.analysis.profiling import ProfileResult
from ortlab.analysis.quantization.error import QuantFix, quantization_error_run
from ortlab.analysis.quantization.metrics import degenerate_notes, lowest_cosine
from ortlab.analysis.quantization.quantize import calibration_data
from ortlab.analysis.quantization.variants import Signal, explain_variant_run
from ortlab.analysis.soak import SoakResult, soak_run, soak_settings
from ortlab.core.config import SessionConfig
from ortlab.core.eps import compiling
from ortlab.core.inputs import unfixed_dims
from ortlab.core.machine import physical_cores
from ortlab.core.model import Model, ModelLike
from ortlab.core.onnx_util import compute_in_bodies
from ortlab.core.run import Run
from ortlab.core.sessionreport import ProviderIssue
from ortlab.core.stats import MIN_ROUNDS, paired_ratio
from ortlab.diagnosis import measure
from ortlab.diagnosis.best import Best, best_of
from ortlab.diagnosis.budget import (
    MEMORY_REPEATS,
    StageBudget,
    fit_screen,
    memory_need_s,
    memory_plan,
)
from ortlab.diagnosis.candidates import (
    setting_candidates,
    variant_candidates,
    variant_config,
)
from ortlab.diagnosis.facts import (
    QUANTIZED,
    Candidate,
    CandidateKey,
    Facts,
    FixTried,
    Kind,
    Measured,
    Observed,
    Outputs,
    measured_row,
    with_cosine,
)
from ortlab.diagnosis.outcome import Outcome, outcome

__all__ = [
    "accuracy",
    "best",
    "candidates",
    "explain_slow",
    "fix_quantization",
    "memory",
    "observe",
    "screen",
]

QUANT_FIX_NODES = 5
"""The worst nodes (lowest SQNR) an int8 fix spares."""
_FIX_KINDS = (("spare", "left in float"), ("16bit", "their outputs quantized to 16 bits"))
"""The variants ``ErrorResult.fix`` makes, in its order: key tag, how the nodes are spared."""
WHATIF_TARGETS = {t: TARGETS[t] for t in DEFAULT_TARGETS}
"""What-if targets by the EP they predict."""


# -- observe ----------------------------------------------------------------


def observe(
    run: Run,
    budget: StageBudget,
    *,
    min_cosine: float,
    generated: GenerationResult | None = None,
) -> Outcome:
    """Profile the baseline; the placement join when an accelerator EP loaded; the what-if
    partition of a requested NPU EP that did not load here: the first :class:`Facts`. It runs
    before the plan, so its failure is the doctor's. ``generated``: a decoder's profiled
    baseline generation, whose decode steps are the profile (``run``: its mean decode step,
    :func:`~ortlab.diagnosis.generation.generation_step`), not profiled again."""
    m, cfg = run.model, run.config
    pl = None
    if generated is not None:  # one profile: the generation's, its decode steps and roofline
        prof = generated.phase_profile("decode")
        roof = generated.roofline("decode") if generated.roofs else None
        past = run.inputs.dims.get("past")
        budget.note(
            "The decoder's step: every candidate is timed at one new token with "
            f"{past.value if past else '?'} tokens cached, the mean of the baseline "
            f"generation's profiled decode steps; the profile is those steps "
            f"({prof.feeds.split(';')[0]}), profiled once for the doctor and the "
            "generation's split (dims= or feeds= time another step)."
        )
    elif compiling(cfg.providers, cfg.policy):  # no roofline: the placement's profile is it
        pl = placement_run(run.derive(runs=5, warmup=2, timeout=budget.call_timeout()))
        assert pl.profile is not None  # a measured placement keeps its profile
        prof, roof = pl.profile, None
    else:
        prof, roof = profile_with_roofline(
            run.derive(runs=5, warmup=2, timeout=budget.call_timeout())
        )
    report = prof.report
    assert report is not None  # a profile always attaches the session's report
    shares = prof.by_op_type().groupby("op_type")["share"].sum().to_dict()
    accelerated = any(p != "CPUExecutionProvider" for p in report.active)
    if pl is None and accelerated:  # the roofline's session cannot be the placement's
        pl = placement_run(run.derive(runs=3, warmup=2, timeout=budget.call_timeout()))
    elif not accelerated:
        pl = None  # one EP ran it all: no join to read
    mem = prof.memory()
    allocator = (
        {
            "arena_bytes": float(mem["arena_bytes"].iloc[-1]),
            "peak_bytes": float(mem["peak_bytes"].max()),
        }
        if len(mem)
        else {}
    )
    symbolic = unfixed_dims(m.signature, cfg.free_dimension_overrides)
    predicted, predicted_fixed = _predict(run, budget, report.missing, bool(symbolic))
    seen = Observed(
        model_name=m.name,
        requested=cfg,
        report=report,
        op_counts=dict(m.summary.op_types),
        profiled_ms=float(np.median(prof.data.run_us)) / 1e3,
        symbolic_inputs=symbolic,
        op_time_share={str(k): float(v) for k, v in shares.items()},
        placement=pl,
        initializer_blocker=initializer_input_blocker(m),
        compute_in_bodies=compute_in_bodies(m.proto.graph),
        cores=physical_cores(),
        min_cosine=min_cosine,
        allocator=allocator,
        predicted=predicted,
        predicted_fixed=predicted_fixed,
        roofline=roof,
    )
    return outcome(budget, Facts(seen, profile=prof))


def memory(run: Run, budget: StageBudget, facts: Facts) -> Outcome:
    """The session's resident memory and each memory setting's, in fresh processes; the
    settings that lower the peak enough to matter are then timed like any candidate."""
    if budget.left() < 0:
        budget.skip("the memory footprint was not measured: the time budget was used up")
        return outcome(budget, facts)
    d = _profiled(facts).data
    plan = (
        1 + len(memory_settings(run.config)),
        d.session_init_us / 1e6,
        float(np.median(d.run_us)) / 1e6,
    )
    why = memory_plan(*plan, budget.budget_s)
    if why:
        budget.skip(why, memory_need_s(*plan))
        return outcome(budget, facts)
    footprint = budget.guarded(
        "the memory footprint",
        "memory",
        lambda: footprint_run(
            run.derive(runs=2, progress=False, timeout=budget.call_timeout()),
            repeats=MEMORY_REPEATS,
        ),
        "ortlab.footprint(model)",
    )
    return outcome(budget, replace(facts, footprint=footprint, soak=_soak(run, budget, facts)))


def _profiled(facts: Facts) -> ProfileResult:
    """The observe stage's profile (every plan runs after it)."""
    assert facts.profile is not None, "the observe stage makes the first facts, with a profile"
    return facts.profile


SOAK_RUNS = 20
"""Runs per phase of the doctor's short soak."""
SOAK_SHARE = 0.1
"""The most of what is left of the budget the soak may plan to take."""
CHILD_S = 2.0
"""A soak child's start-up (an interpreter, onnxruntime, the session): what a setting costs
before its runs."""


def _soak(run: Run, budget: StageBudget, facts: Facts) -> SoakResult | None:
    """A short soak (the session as configured and with the arena off; the same inputs, then
    fresh shapes where ortlab makes the inputs and the model has free dims, else fresh
    values), when it fits its share of the budget: the memory_growth finding rests on it."""
    feeds = run.inputs
    fresh = "fresh shapes" if feeds.synthetic and feeds.dims else "fresh inputs"
    settings = [s[0] for s in soak_settings(run.config)][:2]
    run_s = float(np.median(_profiled(facts).data.run_us)) / 1e6
    need = len(settings) * (CHILD_S + 2 * SOAK_RUNS * run_s * (2 if fresh == "fresh shapes" else 1))
    if need > SOAK_SHARE * budget.left():
        budget.skip("memory growth run after run was not measured: the time budget", need)
        return None
    return budget.guarded(
        "memory growth run after run",
        "memory",
        lambda: soak_run(
            run.derive(runs=SOAK_RUNS, progress=False, timeout=budget.call_timeout()),
            ["same inputs", fresh],
            settings,
            again_if_busy=False,  # its share of the budget is one measurement; the load is said
        ),
        "ortlab.soak(model)",
    )


def _predict(
    run: Run, budget: StageBudget, missing: Sequence[ProviderIssue], symbolic: bool
) -> tuple[WhatIfResult | None, WhatIfResult | None]:
    """A requested NPU EP that does not run here (QNN, NNAPI, CoreML, OpenVINO): predict
    its partition with ``ortlab.whatif`` (its real compiler where one runs without the
    device), as exported and at the timed shapes, so the rules can say why nodes fall
    back and what fixing the shapes gains. (None, None) when none was requested."""
    eps = [i.provider.split(":")[0] for i in missing]
    targets = [t for t, ep in WHATIF_TARGETS.items() if ep in eps]
    if not targets:
        return None, None
    at = unconfigured(run).with_(progress=False)  # as exported, then at the timed shapes
    predicted = budget.guarded(
        f"the what-if partition for {', '.join(targets)}",
        "observe",
        lambda: whatif_run(at.with_(timeout=budget.call_timeout()), targets, fixed=False),
    )
    if predicted is None or not symbolic:
        return predicted, None
    return predicted, budget.guarded(
        "the what-if partition at the timed shapes",
        "observe",
        lambda: whatif_run(at.with_(timeout=budget.call_timeout()), targets, fixed=True),
    )


# -- candidates -------------------------------------------------------------


def candidates(
    run: Run,
    budget: StageBudget,
    facts: Facts,
    *,
    user_variants: Sequence[ModelLike] = (),
    quantize: bool,
    transformers: bool,
) -> Outcome:
    """The baseline, the settings worth timing and the model variants worth building
    (:mod:`ortlab.diagnosis.candidates`; ``items``), and what the transformers optimizer
    fused (``fusion``)."""
    m, cfg = run.model, run.config
    items = setting_candidates(m, cfg, facts.seen, facts.footprint)
    ref = variant_config(cfg)
    built, fusion = variant_candidates(
        m,
        facts.seen,
        user_variants,
        budget=budget,
        feeds=run.inputs,
        quantize=quantize,
        transformers=transformers,
    )
    made = [Candidate(k, variant, ref, steps) for k, variant, steps in built]
    return outcome(budget, replace(facts, items=(*items, *made), fusion=fusion))


# -- measuring --------------------------------------------------------------


def _fit(budget: StageBudget, facts: Facts, share: float) -> list[Candidate]:
    """The candidates that get a verdict's rounds in ``share`` of what is left (see
    :func:`~ortlab.diagnosis.budget.fit_screen`); the others are said once, as skipped."""
    items = list(facts.items)
    per_run = max(facts.baseline_ms, 0.01) / 1e3
    build, floor = facts.seen.report.create_ms / 1e3, 2 if per_run >= 0.02 else 3
    kept = fit_screen(items, per_run, build, budget.left() * share, floor)
    if len(kept) < len(items):
        left_out = [it.key for it in items if it.key not in {k.key for k in kept}]
        each = build + MIN_ROUNDS * floor * per_run
        what = f"{', '.join(left_out)} not timed ({len(kept)} of {len(items)} fit the screen)"
        budget.skip(what, budget.budget_s - budget.left() + len(items) * each / share)
    return kept


def screen(run: Run, budget: StageBudget, facts: Facts) -> Outcome:
    """Stage 1: every candidate, MIN_ROUNDS rounds; stage 2: the survivors, more rounds.
    ``items``: the candidates that ran (the failed ones are left out), ``measured`` their
    rows, ``runs`` and ``rounds`` what they got."""
    items = _fit(budget, facts, 0.35)
    runs, rounds = measure.plan(budget, facts, len(items), 0.35, "the screen")
    first_n = min(rounds, MIN_ROUNDS)
    first = measure.time_items(
        run, budget, items, first_n, runs, desc=f"doctor: screen {len(items)} candidates"
    )
    items, latencies = first.ran, first.latencies
    ref = _ref_index(run, items)
    medians = {it.key: list(first.medians_ms[:, k]) for k, it in enumerate(items)}
    slower = [
        items[k].key
        for k in range(len(items))
        if k not in (0, ref)
        and paired_ratio(first.medians_ms[:, _base(items, k, ref)], first.medians_ms[:, k]).slower
    ]
    if slower:
        budget.note("pruned after the screen (clearly slower): " + ", ".join(slower))
    keep = [it for it in items if it.key not in slower]
    more = rounds - first_n if len(keep) > 1 else 0
    done = first_n
    if more > 0 and budget.left() <= 0:
        budget.skip("more rounds for the survivors of the screen (no time left)")
    elif more > 0:
        second = measure.time_items(run, budget, keep, more, runs, desc="doctor: measure survivors")
        for j, it in enumerate(second.ran):
            medians[it.key].extend(second.medians_ms[:, j])
        latencies = measure.with_latencies(latencies, second.latencies)
        lost = {it.key for it in keep} - {it.key for it in second.ran}
        items = [it for it in items if it.key not in lost]
        done += more
    latencies = measure.with_latencies(facts.latencies, latencies)
    rows = _screen_rows(run, items, medians, latencies)
    return outcome(
        budget,
        replace(
            facts,
            measured={**facts.measured, **rows},
            items=tuple(items),
            latencies=latencies,
            runs=runs,
            rounds=done,
        ),
    )


def _screen_rows(
    run: Run,
    items: list[Candidate],
    medians: dict[str, list[float]],
    latencies: dict[str, tuple[int, ...]],
) -> dict[str, Measured]:
    ref = _ref_index(run, items)
    rows = {}
    for k, (key, mm, c, steps) in enumerate(items):
        b = _base(items, k, ref)
        base = medians[items[b].key]
        n = min(len(medians[key]), len(base))  # pruned ones stop after the first rounds
        rows[key] = measured_row(
            key,
            mm,
            c,
            steps,
            paired_ratio(base[:n], medians[key][:n]),
            p50=measure.p50_ms(latencies[key]),
            stage="screen",
            against=items[b].key,
            variant=measure.variant_name(run, mm),
        )
    return rows


def _ref_index(run: Run, items: list[Candidate]) -> int:
    ref = variant_config(run.config)
    for k, it in enumerate(items):
        if it.model is run.model and it.config == ref and not it.parsed.is_sweep:
            return k
    return 0


def accuracy(run: Run, budget: StageBudget, facts: Facts, *, eval_data: Any = None) -> Outcome:
    """Output cosine of every model variant against the original, on the same samples (the
    screen's rows with their cosine; the ``samples`` and every ``outputs``)."""
    m = run.model
    # At the shapes that are timed: the feeds' own (the caller's first), never defaults.
    samples = calibration_data(m, eval_data, limit=4, seed=100, like=run.inputs)
    base = measure.outputs_of(run, budget, m, run.config, samples)
    for note in degenerate_notes(base):
        budget.note(note)
    if m.random_ops:
        budget.note(m.random_note())
    outputs: dict[str, Outputs] = {**facts.outputs, "baseline": base}
    rows: dict[str, Measured] = {}
    for key, mm, c, _ in facts.items:
        if mm is m or key not in facts.measured:
            continue
        got = budget.guarded(
            f"the accuracy of {key}",
            "accuracy",
            functools.partial(measure.outputs_of, run, budget, mm, c, samples),
        )
        if got is None:  # the variant does not run on the samples: never the best
            rows[key] = with_cosine(facts.measured[key], 0.0)
            continue
        outputs[key] = got
        rows[key] = with_cosine(facts.measured[key], lowest_cosine(base, got))
    return outcome(
        budget,
        replace(facts, samples=samples, outputs=outputs, measured={**facts.measured, **rows}),
    )


def fix_quantization(run: Run, budget: StageBudget, facts: Facts) -> Outcome:
    """For each int8 variant below ``min_cosine``: the variants that spare its worst nodes
    (``quantization_error(...).fix``), timed interleaved with the original and the full
    variant, and scored on the same samples. ``items``: the candidates with the fixes added,
    so the combination stage can pick one like any candidate."""
    items = list(facts.items)
    low = [
        it
        for it in items
        if it.parsed.is_variant
        and it.parsed.arg in QUANTIZED
        and it.key in facts.measured
        and not facts.accurate(facts.measured[it.key])
    ]
    rows: dict[str, Measured] = {}
    outputs = dict(facts.outputs)
    latencies = dict(facts.latencies)
    tried: dict[str, FixTried] = {}
    for key, q, c, _ in low:
        if budget.left() < 0:
            budget.skip(f"a fix for {key} (the time budget was used up)")
            break
        fix = budget.guarded(
            f"sparing the worst nodes of {key}",
            "build",
            functools.partial(_quant_fix, run, budget, q),
            f"ortlab.quantization_error(model, q).fix(n={QUANT_FIX_NODES})",
        )
        if fix is None:
            continue
        fixes: list[Candidate] = []
        spared: dict[str, str] = {}
        for (tag, how), v in zip(_FIX_KINDS, fix.variants, strict=False):
            fkey = f"{key}-{tag}{len(fix.nodes)}"
            fixes.append(Candidate(fkey, v, c, list(v.variant.steps)))
            spared[fkey] = how
        tried[key] = FixTried(list(fix.nodes), spared)
        ref = Candidate(Kind.ORIGINAL.value, run.model, c, [])
        runs, rounds = measure.plan(budget, facts, len(fixes) + 2, 0.15, f"the fixes of {key}")
        timed = measure.time_items(
            run,
            budget,
            [ref, Candidate(key, q, c, []), *fixes],
            rounds,
            runs,
            desc=f"doctor: fixes of {key}",
        )
        latencies = measure.with_latencies(latencies, timed.latencies)
        med = timed.medians_ms
        for j, (fkey, v, fc, steps) in enumerate(timed.ran[2:], start=2):
            row = measured_row(
                fkey,
                v,
                fc,
                steps,
                paired_ratio(med[:, 0], med[:, j]),
                p50=measure.p50_ms(latencies[fkey]),
                stage="screen",
                against="the original",
                variant=v.name,
            )
            got = budget.guarded(
                f"the accuracy of {fkey}",
                "accuracy",
                functools.partial(measure.outputs_of, run, budget, v, fc, facts.eval_samples()),
            )
            if got is not None:
                outputs[fkey] = got
            cosine = lowest_cosine(outputs["baseline"], got) if got is not None else 0.0
            rows[fkey] = with_cosine(row, cosine)
            items.append(Candidate(fkey, v, fc, steps))
    return outcome(
        budget,
        replace(
            facts,
            items=tuple(items),
            measured={**facts.measured, **rows},
            outputs=outputs,
            latencies=latencies,
            quant_fixes={**facts.quant_fixes, **tried},
        ),
    )


def _quant_fix(run: Run, budget: StageBudget, q: Model) -> QuantFix:
    err = quantization_error_run(run.derive(timeout=budget.call_timeout()), q, limit=4)
    return err.fix(n=QUANT_FIX_NODES, timeout=budget.call_timeout())


def explain_slow(run: Run, budget: StageBudget, facts: Facts) -> Outcome:
    """Profile each slower model variant so the rules can say why it is slower (a variant
    that cannot be profiled is a failure, and the others are still explained):
    ``variant_signals``."""
    slow = [
        (key, mm, c)
        for key, mm, c, _ in facts.items
        if CandidateKey.parse(key).is_variant
        and key in facts.measured
        and facts.measured[key].slower
    ]
    signals: list[Signal] = []
    for key, mm, c in slow:
        what = f"profiling the slower {facts.measured[key].variant}"
        explained = budget.guarded(
            what, "explain", functools.partial(_explain, run, budget, facts, (key, mm, c))
        )
        signals += explained or []
    return outcome(budget, replace(facts, variant_signals=tuple(signals)))


def _explain(
    run: Run, budget: StageBudget, facts: Facts, candidate: tuple[str, Model, SessionConfig]
) -> list[Signal]:
    key, mm, c = candidate
    meas = facts.measured[key]
    p = meas.paired
    base = facts.outputs["baseline"]
    return explain_variant_run(
        run.model,
        run.with_(
            model=mm, config=c, runs=3, warmup=1, progress=False, timeout=budget.call_timeout()
        ),
        verdict=(p.as_verdict(), p.verdict),
        label=meas.variant,
        latencies=(list(facts.latencies["baseline"]), list(facts.latencies[key])),
        outputs=(list(base), list(facts.outputs.get(key, base))),
        base_profile=_profiled(facts).data,
        synthetic=facts.eval_samples().synthetic,
    )


def best(run: Run, facts: Facts) -> Best:
    """The fastest accurate candidate significantly faster than the baseline, of the rows
    the stages returned (:func:`~ortlab.diagnosis.best.best_of`)."""
    return best_of(facts.measured, run.config, str(run.model.path), facts.accurate)


def _base(items: list[Candidate], k: int, ref: int) -> int:
    """Model variants compare with the original at the variant config; the rest with the
    baseline."""
    return ref if items[k].parsed.is_variant else 0
