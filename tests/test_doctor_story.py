"""One story, told once: every finding's gain is the measurement that counts for its candidate
(:func:`ortlab.diagnosis.facts.counted`), the one the best is picked from, so no finding says
what the bottom line denies. Hand-built facts for the rules and the best; then real doctor runs
checked against that one home (never by matching their sentences), the best's providers
against what loaded, and an int4 model that gets no int8 candidate."""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Any

import pytest

import ortlab
from ortlab.core.config import SessionConfig
from ortlab.core.inputs import Feeds
from ortlab.core.run import Run
from ortlab.core.stats import Paired
from ortlab.diagnosis import rules
from ortlab.diagnosis.best import Best, best_of, loaded_only
from ortlab.diagnosis.budget import fit_screen
from ortlab.diagnosis.counted import counted
from ortlab.diagnosis.facts import (
    Candidate,
    Facts,
    Finding,
    Measured,
    Observed,
)
from ortlab.engine.session import ProviderIssue, SessionReport
from tests.models import facts_of, measured

CPU, CUDA = "CPUExecutionProvider", "CUDAExecutionProvider"
BERT_OPS = {"MatMul": 16, "Softmax": 2, "Add": 30, "LayerNormalization": 5, "Gelu": 2}


def _report(active: tuple[str, ...] = (CPU,), requested: tuple[str, ...] = (CPU,)) -> Any:
    missing = [ProviderIssue(p, "not here") for p in requested if p not in active]
    return SessionReport(
        requested=list(requested),
        active=list(active),
        missing=missing,
        level="all",
        create_ms=1.0,
        ort_version="1.31.1",
    )


_m = measured  # the one test maker of a measured row (tests.models)


def _facts(measured: dict[str, Measured], **kw: Any) -> Facts:
    base: dict[str, Any] = {
        "model_name": "m",
        "requested": SessionConfig(),
        "report": _report(),
        "op_counts": {"Conv": 3},
        "baseline_ms": 10.0,
        "cores": 2,
    }
    return facts_of(**{**base, "measured": measured, **kw})


def _accurate(m: Measured) -> bool:
    return math.isnan(m.cosine) or m.cosine >= 0.999


def _best(f: Facts) -> Best:
    return best_of(f.measured, SessionConfig(), "m.onnx", _accurate)


def assert_one_story(findings: list[Finding], measured: dict[str, Measured], best: Best) -> None:
    """The agreement the issue asks for, against the one home: each finding's ratio is the
    ratio of the measurement :func:`counted` returns for its key; the best is the row counted
    for its key; with the original as best, no finding quotes a gain that held (on an accurate
    candidate); a finding whose gain did not hold is not titled "... is faster"."""
    for x in findings:
        if x.ratio is None:
            continue
        assert x.key, f"{x.rule}: a ratio without the candidate it quotes"
        said = counted(measured, x.key)
        assert said is not None, x.key
        ratio = said.row.paired.ratio
        assert x.ratio == ratio or (math.isnan(x.ratio) and math.isnan(ratio))
        if not said.holds:
            assert "is faster" not in x.title, (x.title, said.status)
            assert x.saved_ms == 0.0 or said.row.slower  # a slower one ranks by what it costs
        if best.variant == "original" and best.key == "" and _accurate(said.row):
            assert not said.holds, f"{x.rule} claims a gain the best denies: {x.gain}"
    if best.key:
        said = counted(measured, best.key)
        assert said is not None and said.holds
        assert best.paired.ratio == said.row.paired.ratio


# ---------------------------------------------------------------------- the one home


def test_a_screen_winner_that_did_not_hold_is_not_called_faster() -> None:
    """intra=1 was 1.58x faster in the screen; re-measured with the baseline it was not: the
    finding says so, with the re-measured ratio, and the best is the original."""
    t1 = SessionConfig(intra_op_threads=1)
    measured = {
        "baseline": _m("baseline", 1.0, 1.0, 1.0),
        "threads:1": _m("threads:1", 0.63, 0.55, 0.7, config=t1),
        "threads:1+final": _m("threads:1+final", 0.99, 0.95, 1.04, stage="final", config=t1),
    }
    f = _facts(measured)
    best = _best(f)
    assert best.variant == "original" and best.key == ""
    (x,) = [y for y in rules.run_rules(f) if y.rule == "threads"]
    said = counted(measured, "threads:1")
    assert said is not None and said.did_not_hold and not said.holds
    assert x.ratio == 0.99 and x.key == "threads:1" and x.severity == "info"
    assert "did not hold" in x.gain and x.saved_ms == 0.0
    assert_one_story(rules.run_rules(f), measured, best)


def test_a_final_row_of_the_same_config_counts_for_the_screen_candidate() -> None:
    """The combined settings were intra=1 alone, so the final stage timed them as 'settings'
    (one session per config): that re-measurement counts for threads:1, in the finding and
    in the best (once 'no measurable difference' beside a best '1.66x faster')."""
    t1 = SessionConfig(intra_op_threads=1)
    measured = {
        "baseline": _m("baseline", 1.0, 1.0, 1.0),
        "threads:1": _m("threads:1", 0.97, 0.9, 1.02, config=t1),
        "settings": _m("settings", 0.6, 0.55, 0.66, stage="final", config=t1, p50=6.0),
    }
    f = _facts(measured)
    best = _best(f)
    said = counted(measured, "threads:1")
    assert said is not None and said.row is measured["settings"] and said.holds
    assert best.paired.ratio == 0.6
    (x,) = [y for y in rules.run_rules(f) if y.rule == "threads"]
    assert x.title == "threads:1 is faster than the thread settings asked for"
    assert x.ratio == 0.6 and x.saved_ms == pytest.approx(4.0)
    assert_one_story(rules.run_rules(f), measured, best)


def test_a_candidate_only_screened_is_not_a_verified_gain() -> None:
    """The final stage ran without re-measuring level:all: its screen gain is said as screened
    only, saves nothing in the ranking, and cannot be the best."""
    measured = {
        "baseline": _m("baseline", 1.0, 1.0, 1.0),
        "level:all": _m("level:all", 0.7, 0.65, 0.75, config=SessionConfig(level="all")),
        "iobinding": _m("iobinding", 0.9, 0.85, 0.95, config=SessionConfig(io_binding=True)),
        "iobinding+final": _m(
            "iobinding+final", 0.9, 0.86, 0.94, stage="final", config=SessionConfig(io_binding=True)
        ),
    }
    f = _facts(measured, requested=SessionConfig(level="basic"))
    said = counted(measured, "level:all")
    assert said is not None and said.status == "screened only" and not said.holds
    (x,) = [y for y in rules.run_rules(f) if y.rule == "optimization_level"]
    assert x.ratio == 0.7 and x.saved_ms == 0.0 and "screened only" in x.gain
    best = _best(f)
    assert best.key == "iobinding" and best.paired.ratio == 0.9
    assert_one_story(rules.run_rules(f), measured, best)


def test_without_a_final_stage_the_screen_counts() -> None:
    measured = {
        "baseline": _m("baseline", 1.0, 1.0, 1.0),
        "level:all": _m("level:all", 0.7, 0.65, 0.75),
    }
    said = counted(measured, "level:all")
    assert said is not None and said.status == "screen" and said.holds
    assert said.verdict() == "verdict of level:all"
    assert counted(measured, "threads:1") is None
    assert _best(_facts(measured)).key == "level:all"


def test_the_quantization_finding_and_the_best_read_the_same_row() -> None:
    q = "variant:quant-dynamic"
    measured = {
        "baseline": _m("baseline", 1.0, 1.0, 1.0),
        q: _m(q, 0.6, 0.5, 0.7, cosine=0.9999, variant="q"),
        f"{q}+final": _m(f"{q}+final", 1.0, 0.96, 1.05, stage="final", cosine=0.9999, variant="q"),
    }
    f = _facts(measured)
    (x,) = [y for y in rules.run_rules(f) if y.rule == "quantization"]
    assert x.title.startswith("q: faster in the screen, not when re-measured")
    assert x.ratio == 1.0 and x.severity == "info"
    assert_one_story(rules.run_rules(f), measured, _best(f))


# ---------------------------------------------------------------------- what ORT ran


def test_unfused_transformer_reads_what_ort_ran() -> None:
    """bert_tiny: its file has no fused op, but ORT fused SkipLayerNormalization and BiasGelu
    at session time (the profile shows them): the evidence says so, never "no fused
    SkipLayerNormalization"; with a fused Attention in the profile there is nothing to say."""
    ran = {"MatMul": 0.4, "SkipLayerNormalization": 0.2, "BiasGelu": 0.06, "Softmax": 0.03}
    f = _facts({}, op_counts=dict(BERT_OPS), op_time_share=ran)
    (x,) = [y for y in rules.run_rules(f) if y.rule == "unfused_transformer"]
    assert "no fused Attention/SkipLayerNormalization" not in x.evidence
    assert "BiasGelu, SkipLayerNormalization" in x.evidence and x.title == "attention is not fused"
    fused = _facts({}, op_counts=dict(BERT_OPS), op_time_share={**ran, "Attention": 0.3})
    assert [y for y in rules.run_rules(fused) if y.rule == "unfused_transformer"] == []
    bare = _facts({}, op_counts=dict(BERT_OPS), op_time_share={"MatMul": 0.5, "Add": 0.2})
    (y,) = [z for z in rules.run_rules(bare) if z.rule == "unfused_transformer"]
    assert y.title == "transformer blocks are not fused"


# ---------------------------------------------------------------------- providers


def test_a_best_never_keeps_a_provider_that_did_not_load() -> None:
    cfg = SessionConfig(["cuda", "cpu"], provider_options={"cuda": {"device_id": "0"}})
    nan = math.nan
    best = Best(cfg, "original", "m.onnx", [], Paired(1.0, nan, nan, "none"), 1.0)
    kept, note = loaded_only(best, [CPU])
    assert kept.config.providers == (CPU,) and kept.config.provider_options == ()
    assert "CUDA" in note and "did not load" in note
    same, none = loaded_only(best, [CUDA, CPU])
    assert same == best and none == ""
    auto = dataclasses.replace(best, config=SessionConfig("auto"))
    assert loaded_only(auto, [CPU]) == (auto, "")


# ---------------------------------------------------------------------- the budget


def test_the_screen_keeps_what_fits_six_rounds(mlp: ortlab.Model) -> None:
    keys = [
        "baseline",
        "level:basic",
        "level:all",
        "threads:1",
        "spin:off",
        "memory:arena off",
        "variant:quant-static",
    ]
    items = [Candidate(k, mlp, SessionConfig(), []) for k in keys]
    # 6 rounds x 2 runs x 0.1 s + 0.1 s build = 1.3 s each: 4 fit in 5.5 s
    kept = [it.key for it in fit_screen(items, 0.1, 0.1, 5.5, 2)]
    assert kept == ["baseline", "level:basic", "level:all", "variant:quant-static"]
    assert [it.key for it in fit_screen(items, 0.1, 0.1, 100.0, 2)] == keys  # all fit
    assert [it.key for it in fit_screen(items, 0.1, 0.1, 2.0, 2)] == keys  # none would: all


# ---------------------------------------------------------------------- real runs


@pytest.fixture(scope="module")
def int4_model() -> ortlab.Model:
    return ortlab.quantize(ortlab.examples.load("decoder_tiny"), mode="int4", block_size=32)


def test_an_int4_model_gets_no_int8_candidate(int4_model: ortlab.Model) -> None:
    """MatMulNBits carries the time: the doctor used to propose dynamic int8 and list ORT's
    refusal as a warning. A candidate that cannot apply is not proposed, and not a finding."""
    from ortlab.diagnosis import search
    from ortlab.diagnosis.budget import Budget
    from ortlab.diagnosis.facts import Facts
    from ortlab.diagnosis.outcome import run_stage

    run = Run(int4_model, SessionConfig(), Feeds({}), progress=False)
    budget = Budget(600.0, time.perf_counter())
    ops = dict(int4_model.summary.op_types)
    seen = Observed(
        model_name="q",
        requested=SessionConfig(),
        report=_report(),
        op_counts=ops,
        profiled_ms=1.0,
        op_time_share={"MatMulNBits": 0.7, "Add": 0.1},
        cores=2,
    )
    build = functools.partial(search.candidates, quantize=True, transformers=False)
    out = run_stage(build, run, budget, Facts(seen))
    assert not [it.key for it in out.facts.items if "quant" in it.key]
    assert out.said.failures == ()  # not a failure either
    notes = out.said.notes
    assert any("already quantized" in n and "MatMulNBits" in n for n in notes), notes


@pytest.fixture(scope="module")
def cuda_doctor() -> ortlab.DoctorResult:
    return ortlab.doctor(
        ortlab.examples.mlp(),
        providers=["cuda", "cpu"],
        budget_s=20,
        rounds=6,
        quantize=False,
        progress=False,
    )


@pytest.mark.slow
def test_the_best_lists_only_providers_that_loaded(cuda_doctor: ortlab.DoctorResult) -> None:
    d = cuda_doctor
    assert d.profile is not None and d.profile.report is not None
    active = set(d.profile.report.active)
    assert set(d.best.config.providers) <= active, (d.best.config, active)
    if CUDA not in active:
        assert any("leaves out CUDA" in n for n in d.notes), d.notes
    measured = {m.key: m for m in d.measured}
    assert_one_story(d.findings, measured, d.best)


@pytest.fixture(scope="module")
def bert_doctor() -> ortlab.DoctorResult:
    return ortlab.doctor(
        ortlab.examples.load("bert_tiny"), budget_s=60, rounds=6, memory=False, progress=False
    )


@pytest.mark.slow
def test_a_real_doctor_tells_one_story(bert_doctor: ortlab.DoctorResult) -> None:
    d = bert_doctor
    measured = {m.key: m for m in d.measured}
    assert_one_story(d.findings, measured, d.best)
    # what ORT ran: its profile's op types, not only the file's
    assert d.profile is not None
    ran = set(d.profile.by_op_type()["op_type"])
    for x in d.findings:
        if x.rule == "unfused_transformer" and "SkipLayerNormalization" in ran:
            assert "no fused Attention/SkipLayerNormalization" not in x.evidence
    # the budget's note, if any, is said once and last
    said = [n for n in d.notes if "raise budget_s" in n]
    assert len(said) <= 1 and (not said or d.notes[-1] == said[0]), d.notes


def test_a_slower_variant_says_its_screen_verdict_as_such() -> None:
    v = "variant:given"
    measured = {
        "baseline": _m("baseline", 1.0, 1.0, 1.0),
        v: dataclasses.replace(
            _m(v, 1.5, 1.4, 1.6, cosine=1.0, variant="given", p50=15.0), model_path="given.onnx"
        ),
        "settings": _m("settings", 0.9, 0.85, 0.95, stage="final"),
    }
    f = _facts(measured)
    (x,) = [y for y in rules.run_rules(f) if y.rule == "slow_variant"]
    assert x.key == v and x.ratio == 1.5 and x.saved_ms == pytest.approx(5.0)
    assert x.gain == "verdict of variant:given (in the screen; not re-measured)"
    assert_one_story(rules.run_rules(f), measured, _best(f))


@pytest.mark.slow
def test_the_doctor_and_a_roofline_read_the_same_ceilings(
    bert_doctor: ortlab.DoctorResult,
) -> None:
    """One measurement of a machine fact per session: the doctor's roofline and a roofline the
    user (or the Lab's Limits tab) asks for afterwards, at the same EP and thread settings,
    hold the very same Peak objects, unless a later measurement raised one."""
    d = bert_doctor
    assert d.roofline is not None
    again = ortlab.roofline(
        ortlab.examples.load("bert_tiny"),
        d.requested.with_(level="basic"),
        runs=3,
        progress=False,
    )
    mine = {p.dtype: p for p in d.roofline.peaks}
    for p in again.peaks:
        old = mine.get(p.dtype, p)
        if p.measured == old.measured and p.best == old.best:
            assert p is old
        else:  # measured again since, or raised to what a node reached: only ever up
            assert p.best >= old.best
