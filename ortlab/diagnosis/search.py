"""The doctor's search stages, each a function ``stage(ledger, got, out) -> Outcome``
(:mod:`ortlab.diagnosis.outcome`): observe the session, build candidate fixes, time them
interleaved with the baseline (screen, prune, measure survivors), score the variants' accuracy
and fix the inaccurate int8 ones, explain the slower variants; the final combination is
:mod:`ortlab.diagnosis.verify`'s. Each returns its rows and facts; ``doctor()`` folds them
into the ledger (:mod:`ortlab.diagnosis.ledger`) and the facts so far.

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
from typing import Any

import numpy as np

from ortlab.analysis.limits.roofline import profile_with_roofline
from ortlab.analysis.memory import footprint, memory_settings
from ortlab.analysis.optimizers.levels import initializer_input_blocker
from ortlab.analysis.placement.measure import placement
from ortlab.analysis.placement.whatif import whatif
from ortlab.analysis.placement.whatifresult import DEFAULT_TARGETS, TARGETS, WhatIfResult
from ortlab.analysis.quantization.error import QuantFix, quantization_error
from ortlab.analysis.quantization.metrics import degenerate_notes
from ortlab.analysis.quantization.quantize import calibration_data
from ortlab.analysis.quantization.variants import Signal, explain_variant
from ortlab.analysis.soak import SoakResult, soak, soak_settings
from ortlab.core.config import SessionConfig
from ortlab.core.eps import compiling
from ortlab.core.inputs import unfixed_dims
from ortlab.core.machine import physical_cores
from ortlab.core.model import Model, ModelLike
from ortlab.core.onnx_util import compute_in_bodies
from ortlab.core.sessionreport import ProviderIssue
from ortlab.core.stats import MIN_ROUNDS, paired_ratio
from ortlab.diagnosis import measure
from ortlab.diagnosis.best import Best, best_of
from ortlab.diagnosis.budget import (
    MEMORY_REPEATS,
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
    FixTried,
    Kind,
    Measured,
    Observed,
    baseline_ms,
    measured_row,
    with_cosine,
)
from ortlab.diagnosis.ledger import Item, Ledger
from ortlab.diagnosis.outcome import Got, Outcome

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


def observe(ledger: Ledger, out: Outcome) -> Outcome:
    """Profile the baseline; the placement join when an accelerator EP loaded; the what-if
    partition of a requested NPU EP that did not load here (``out.observed``, ``out.profile``).
    It runs before the plan: nothing is measured before it, so its failure is the doctor's."""
    m, cfg = ledger.m, ledger.cfg
    pl = None
    if compiling(cfg.providers, cfg.policy):  # no roofline: the placement's profile is it
        pl = placement(m, cfg, ledger.feeds, runs=5, progress=False, timeout=ledger.call_timeout())
        assert pl.profile is not None  # a measured placement keeps its profile
        prof, roof = pl.profile, None
    else:
        prof, roof = profile_with_roofline(
            m, cfg, ledger.feeds, runs=5, warmup=2, timeout=ledger.call_timeout()
        )
    out.profile = prof
    report = prof.report
    assert report is not None  # profile() always attaches the session's report
    shares = prof.by_op_type().groupby("op_type")["share"].sum().to_dict()
    accelerated = any(p != "CPUExecutionProvider" for p in report.active)
    if pl is None and accelerated:  # the roofline's session cannot be the placement's
        pl = placement(m, cfg, ledger.feeds, runs=3, progress=False, timeout=ledger.call_timeout())
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
    predicted, predicted_fixed = _predict(ledger, report.missing, bool(symbolic))
    out.observed = Observed(
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
        min_cosine=ledger.min_cosine,
        allocator=allocator,
        predicted=predicted,
        predicted_fixed=predicted_fixed,
        roofline=roof,
    )
    return out


def memory(ledger: Ledger, got: Got, out: Outcome) -> Outcome:  # noqa: ARG001 - a stage's shape
    """The session's resident memory and each memory setting's, in fresh processes; the
    settings that lower the peak enough to matter are then timed like any candidate."""
    if ledger.left() < 0:
        ledger.skip("the memory footprint was not measured: the time budget was used up")
        return out
    d = ledger.profile.data
    plan = (
        1 + len(memory_settings(ledger.cfg)),
        d.session_init_us / 1e6,
        float(np.median(d.run_us)) / 1e6,
    )
    why = memory_plan(*plan, ledger.budget_s)
    if why:
        ledger.skip(why, memory_need_s(*plan))
        return out
    out.footprint = ledger.guarded(
        "the memory footprint",
        "memory",
        lambda: footprint(
            ledger.m,
            ledger.cfg,
            ledger.feeds,
            repeats=MEMORY_REPEATS,
            runs=2,
            progress=False,
            timeout=ledger.call_timeout(),
        ),
        "ortlab.footprint(model)",
    )
    out.soak = _soak(ledger)
    return out


SOAK_RUNS = 20
"""Runs per phase of the doctor's short soak."""
SOAK_SHARE = 0.1
"""The most of what is left of the budget the soak may plan to take."""
CHILD_S = 2.0
"""A soak child's start-up (an interpreter, onnxruntime, the session): what a setting costs
before its runs."""


def _soak(ledger: Ledger) -> SoakResult | None:
    """A short ``ortlab.soak`` (the session as configured and with the arena off; the same
    inputs, then fresh shapes where ortlab makes the inputs and the model has free dims, else
    fresh values), when it fits its share of the budget: the memory_growth finding rests on
    it."""
    feeds = ledger.feeds
    fresh = "fresh shapes" if feeds.synthetic and feeds.dims else "fresh inputs"
    settings = [s[0] for s in soak_settings(ledger.cfg)][:2]
    run_s = float(np.median(ledger.profile.data.run_us)) / 1e6
    need = len(settings) * (CHILD_S + 2 * SOAK_RUNS * run_s * (2 if fresh == "fresh shapes" else 1))
    if need > SOAK_SHARE * ledger.left():
        ledger.skip("memory growth run after run was not measured: the time budget", need)
        return None
    return ledger.guarded(
        "memory growth run after run",
        "memory",
        lambda: soak(
            ledger.m,
            ledger.cfg,
            None if feeds.synthetic else ledger.feeds,
            dims={n: c.value for n, c in feeds.dims.items()} if feeds.synthetic else None,
            runs=SOAK_RUNS,
            phases=["same inputs", fresh],
            settings=settings,
            progress=False,
            timeout=ledger.call_timeout(),
        ),
        "ortlab.soak(model)",
    )


def _predict(
    ledger: Ledger, missing: Sequence[ProviderIssue], symbolic: bool
) -> tuple[WhatIfResult | None, WhatIfResult | None]:
    """A requested NPU EP that does not run here (QNN, NNAPI, CoreML, OpenVINO): predict
    its partition with ``ortlab.whatif`` (its real compiler where one runs without the
    device), as exported and at the timed shapes, so the rules can say why nodes fall
    back and what fixing the shapes gains. (None, None) when none was requested."""
    eps = [i.provider.split(":")[0] for i in missing]
    targets = [t for t, ep in WHATIF_TARGETS.items() if ep in eps]
    if not targets:
        return None, None
    predicted = ledger.guarded(
        f"the what-if partition for {', '.join(targets)}",
        "observe",
        lambda: whatif(ledger.m, targets, progress=False, timeout=ledger.call_timeout()),
    )
    if predicted is None or not symbolic:
        return predicted, None
    return predicted, ledger.guarded(
        "the what-if partition at the timed shapes",
        "observe",
        lambda: whatif(
            ledger.m, targets, feeds=ledger.feeds, progress=False, timeout=ledger.call_timeout()
        ),
    )


# -- candidates -------------------------------------------------------------


def candidates(
    ledger: Ledger,
    got: Got,
    out: Outcome,
    *,
    user_variants: Sequence[ModelLike] = (),
    quantize: bool,
    transformers: bool,
) -> Outcome:
    """The baseline, the settings worth timing and the model variants worth building
    (:mod:`ortlab.diagnosis.candidates`; ``out.items``), and what the transformers optimizer
    fused (``out.fusion``)."""
    items = setting_candidates(ledger.m, ledger.cfg, got.seen, got.footprint)
    ref = variant_config(ledger.cfg)
    built, out.fusion = variant_candidates(
        ledger.m,
        got.seen,
        user_variants,
        budget=ledger.budget,
        feeds=ledger.feeds,
        notes=out.said.notes,
        quantize=quantize,
        transformers=transformers,
    )
    out.items = items + [Candidate(k, variant, ref, steps) for k, variant, steps in built]
    return out


# -- measuring --------------------------------------------------------------


def _fit(ledger: Ledger, items: list[Item], seen: Observed, share: float) -> list[Item]:
    """The candidates that get a verdict's rounds in ``share`` of what is left (see
    :func:`~ortlab.diagnosis.budget.fit_screen`); the others are said once, as skipped."""
    per_run = max(baseline_ms(seen, ledger.measured), 0.01) / 1e3
    build, floor = seen.report.create_ms / 1e3, 2 if per_run >= 0.02 else 3
    kept = fit_screen(items, per_run, build, ledger.left() * share, floor)
    if len(kept) < len(items):
        left_out = [it.key for it in items if it.key not in {k.key for k in kept}]
        each = build + MIN_ROUNDS * floor * per_run
        what = f"{', '.join(left_out)} not timed ({len(kept)} of {len(items)} fit the screen)"
        ledger.skip(what, ledger.budget_s - ledger.left() + len(items) * each / share)
    return kept


def screen(ledger: Ledger, got: Got, out: Outcome) -> Outcome:
    """Stage 1: every candidate, MIN_ROUNDS rounds; stage 2: the survivors, more rounds.
    ``out.items``: the candidates that ran (the failed ones are left out), ``out.rows``
    their rows, ``out.timing`` the runs and rounds they got."""
    seen = got.seen
    items = _fit(ledger, got.items, seen, 0.35)
    runs, rounds = measure.plan(ledger, len(items), seen, 0.35, "the screen")
    first_n = min(rounds, MIN_ROUNDS)
    first, items = measure.time_items(
        ledger, items, first_n, runs, f"doctor: screen {len(items)} candidates"
    )
    ref = _ref_index(ledger, items)
    medians = {it[0]: list(first[:, k]) for k, it in enumerate(items)}
    slower = [
        items[k][0]
        for k in range(len(items))
        if k not in (0, ref) and paired_ratio(first[:, _base(items, k, ref)], first[:, k]).slower
    ]
    if slower:
        ledger.notes.append("pruned after the screen (clearly slower): " + ", ".join(slower))
    keep = [it for it in items if it[0] not in slower]
    more = rounds - first_n if len(keep) > 1 else 0
    done = first_n
    if more > 0 and ledger.left() <= 0:
        ledger.skip("more rounds for the survivors of the screen (no time left)")
    elif more > 0:
        second, ran = measure.time_items(ledger, keep, more, runs, "doctor: measure survivors")
        for j, (key, *_) in enumerate(ran):
            medians[key].extend(second[:, j])
        lost = {it[0] for it in keep} - {it[0] for it in ran}
        items = [it for it in items if it[0] not in lost]
        done += more
    out.rows, out.items, out.timing = _screen_rows(ledger, items, medians), items, (runs, done)
    return out


def _screen_rows(
    ledger: Ledger, items: list[Item], medians: dict[str, list[float]]
) -> dict[str, Measured]:
    ref = _ref_index(ledger, items)
    rows = {}
    for k, (key, mm, c, steps) in enumerate(items):
        b = _base(items, k, ref)
        base = medians[items[b][0]]
        n = min(len(medians[key]), len(base))  # pruned ones stop after the first rounds
        v = paired_ratio(base[:n], medians[key][:n])
        p50 = float(np.median(np.asarray(ledger.latencies[key]) / 1e6))
        rows[key] = measured_row(
            key,
            mm,
            c,
            steps,
            v,
            p50=p50,
            stage="screen",
            against=items[b][0],
            variant=measure.variant_name(ledger, mm),
        )
    return rows


def _ref_index(ledger: Ledger, items: list[Item]) -> int:
    ref = variant_config(ledger.cfg)
    for k, it in enumerate(items):
        if it.model is ledger.m and it.config == ref and not it.parsed.is_sweep:
            return k
    return 0


def accuracy(ledger: Ledger, got: Got, out: Outcome, *, eval_data: Any = None) -> Outcome:
    """Output cosine of every model variant against the original, on the same samples (the
    screen's rows with their cosine; ``out.samples``)."""
    # At the shapes that are timed: the feeds' own (the caller's first), never defaults.
    samples = calibration_data(ledger.m, eval_data, limit=4, seed=100, like=ledger.feeds)
    out.samples = samples
    ledger.outputs["baseline"] = measure.outputs_of(ledger, ledger.m, ledger.cfg, samples)
    out.said.notes += degenerate_notes(ledger.outputs["baseline"])
    out.said.notes += [ledger.m.random_note()] if ledger.m.random_ops else []
    for key, mm, c, _ in got.items:
        if mm is ledger.m or key not in ledger.measured:
            continue
        outputs = ledger.guarded(
            f"the accuracy of {key}",
            "accuracy",
            functools.partial(measure.outputs_of, ledger, mm, c, samples),
        )
        if outputs is None:  # the variant does not run on the samples: never the best
            out.rows[key] = with_cosine(ledger.measured[key], 0.0)
            continue
        ledger.outputs[key] = outputs
        out.rows[key] = with_cosine(ledger.measured[key], measure.cosine_of(ledger, key))
    return out


def fix_quantization(ledger: Ledger, got: Got, out: Outcome) -> Outcome:
    """For each int8 variant below ``min_cosine``: the variants that spare its worst nodes
    (``quantization_error(...).fix``), timed interleaved with the original and the full
    variant, and scored on the same samples. ``out.items``: the candidates with the fixes
    added, so the combination stage can pick one like any candidate."""
    items, seen = list(got.items), got.seen
    low = [
        it
        for it in items
        if it.parsed.is_variant
        and it.parsed.arg in QUANTIZED
        and it.key in ledger.measured
        and not ledger.accurate(ledger.measured[it.key])
    ]
    for key, q, c, _ in low:
        if ledger.left() < 0:
            ledger.skip(f"a fix for {key} (the time budget was used up)")
            break
        fix = ledger.guarded(
            f"sparing the worst nodes of {key}",
            "build",
            functools.partial(_quant_fix, ledger, q),
            f"ortlab.quantization_error(model, q).fix(n={QUANT_FIX_NODES})",
        )
        if fix is None:
            continue
        fixes: list[Item] = []
        spared: dict[str, str] = {}
        for (tag, how), v in zip(_FIX_KINDS, fix.variants, strict=False):
            fkey = f"{key}-{tag}{len(fix.nodes)}"
            fixes.append(Candidate(fkey, v, c, list(v.variant.steps)))
            spared[fkey] = how
        out.quant_fixes[key] = FixTried(list(fix.nodes), spared)
        ref = Candidate(Kind.ORIGINAL.value, ledger.m, c, [])
        runs, rounds = measure.plan(ledger, len(fixes) + 2, seen, 0.15, f"the fixes of {key}")
        med, ran = measure.time_items(
            ledger, [ref, Candidate(key, q, c, []), *fixes], rounds, runs, f"doctor: fixes of {key}"
        )
        for j, (fkey, v, fc, steps) in enumerate(ran[2:], start=2):
            row = measured_row(
                fkey,
                v,
                fc,
                steps,
                paired_ratio(med[:, 0], med[:, j]),
                p50=float(np.median(np.asarray(ledger.latencies[fkey]) / 1e6)),
                stage="screen",
                against="the original",
                variant=v.name,
            )
            outputs = ledger.guarded(
                f"the accuracy of {fkey}",
                "accuracy",
                functools.partial(measure.outputs_of, ledger, v, fc),
            )
            if outputs is not None:
                ledger.outputs[fkey] = outputs
            out.rows[fkey] = with_cosine(row, measure.cosine_of(ledger, fkey) if outputs else 0.0)
            items.append(Candidate(fkey, v, fc, steps))
    out.items = items
    return out


def _quant_fix(ledger: Ledger, q: Model) -> QuantFix:
    err = quantization_error(
        ledger.m, q, feeds=ledger.feeds, limit=4, timeout=ledger.call_timeout()
    )
    return err.fix(n=QUANT_FIX_NODES, timeout=ledger.call_timeout())


def explain_slow(ledger: Ledger, got: Got, out: Outcome) -> Outcome:
    """Profile each slower model variant so the rules can say why it is slower (a variant
    that cannot be profiled is a failure, and the others are still explained):
    ``out.signals``."""
    slow = [
        (key, mm, c)
        for key, mm, c, _ in got.items
        if CandidateKey.parse(key).is_variant
        and key in ledger.measured
        and ledger.measured[key].slower
    ]
    signals: list[Signal] = []
    for key, mm, c in slow:
        what = f"profiling the slower {ledger.measured[key].variant}"
        signals += (
            ledger.guarded(what, "explain", functools.partial(_explain, ledger, key, mm, c)) or []
        )
    out.signals = signals
    return out


def _explain(ledger: Ledger, key: str, mm: Model, c: SessionConfig) -> list[Signal]:
    meas = ledger.measured[key]
    p = meas.paired
    v = p.as_verdict()
    return list(
        explain_variant(
            ledger.m,
            mm,
            c,
            ledger.feeds,
            verdict=(v, p.verdict),
            label=meas.variant,
            latencies=(ledger.latencies["baseline"], ledger.latencies[key]),
            outputs=(
                ledger.outputs["baseline"],
                ledger.outputs.get(key, ledger.outputs["baseline"]),
            ),
            base_profile=ledger.profile.data,
            synthetic=ledger.eval_samples().synthetic,
            timeout=ledger.call_timeout(),
        )
    )


def best(ledger: Ledger) -> Best:
    """The fastest accurate candidate significantly faster than the baseline, of the rows
    the stages returned (:func:`~ortlab.diagnosis.best.best_of`)."""
    return best_of(ledger.measured, ledger.cfg, str(ledger.m.path), ledger.accurate)


def _base(items: list[Item], k: int, ref: int) -> int:
    """Model variants compare with the original at the variant config; the rest with the
    baseline."""
    return ref if items[k].parsed.is_variant else 0
