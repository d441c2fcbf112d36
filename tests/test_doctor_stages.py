"""Each doctor stage run alone (issue 48 item 1, issue 64 item 1): a stage reads the Run, its
budget and the facts so far, frozen, and returns its Outcome — the facts after it and what it
said; nothing it read changes until ``doctor()`` folds it.

The stages run here one at a time on the MLP with the real worker, in the doctor's order, each
outcome checked on its own before it is folded: what a test of one stage, a reordered plan or a
new stage builds on.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any

import pytest

import ortlab
from ortlab.core.config import SessionConfig
from ortlab.diagnosis import search
from ortlab.diagnosis.budget import Budget
from ortlab.diagnosis.cpu import search_cpu
from ortlab.diagnosis.facts import QUANTIZED, CandidateKey, Facts, Measured
from ortlab.diagnosis.outcome import Outcome, run_stage
from ortlab.diagnosis.verify import combine
from ortlab.engine.calls import edge

pytestmark = pytest.mark.slow

PLAN: list[tuple[str, Any]] = [
    ("memory", search.memory),
    ("build variants", functools.partial(search.candidates, quantize=True, transformers=False)),
    ("screen", search.screen),
    ("CPU cost", functools.partial(search_cpu, objective="latency")),
    ("accuracy", search.accuracy),
    ("quantization fix", search.fix_quantization),
    ("combine", combine),
    ("explain", search.explain_slow),
]


@pytest.fixture(scope="module")
def alone() -> dict[str, tuple[Outcome, Facts]]:
    """Each stage's outcome with the facts it read, the stages before it folded in order."""
    m = ortlab.load(ortlab.examples.mlp())
    run = edge(m, SessionConfig(fallback="allow"), None, progress=False)
    budget = Budget(120.0, time.perf_counter())
    first = search.observe(run, budget.for_stage(), min_cosine=0.999)
    out: dict[str, tuple[Outcome, Facts]] = {"observe": (first, first.facts)}
    facts = first.folded()
    for name, stage in PLAN:
        before = dataclasses.replace(facts)  # a copy: the stage must leave what it read as it was
        outcome = run_stage(stage, run, budget, facts)
        assert facts == before, f"{name} changed the facts it read"
        out[name] = (outcome, facts)
        facts = outcome.folded()
    return out


def _rows(out: Outcome, before: Facts) -> dict[str, Measured]:
    """The rows a stage added or replaced."""
    return {k: v for k, v in out.facts.measured.items() if before.measured.get(k) is not v}


def test_observe_returns_the_baseline_it_saw(alone: Any) -> None:
    out, _ = alone["observe"]
    assert out.facts.profile is not None and out.facts.measured == {}
    assert out.facts.seen.model_name == "mlp" and out.facts.seen.profiled_ms > 0
    _, after = alone["memory"]
    assert after.profile is out.facts.profile  # folded: later stages read it


def test_memory_returns_the_footprint_or_says_why_not(alone: Any) -> None:
    out, before = alone["memory"]
    fp = out.facts.footprint
    assert before.footprint is None and (fp is not None or out.said.skipped), out.said
    if fp is not None:
        assert fp.to_pandas()["peak_bytes"].gt(0).all()


def test_build_returns_the_candidates_baseline_first(alone: Any) -> None:
    out, before = alone["build variants"]
    keys = [c.key for c in out.facts.items]
    assert keys[0] == "baseline" and "variant:quant-dynamic" in keys
    assert _rows(out, before) == {} and before.items == ()


def test_screen_returns_a_row_per_candidate_that_ran(alone: Any) -> None:
    out, before = alone["screen"]
    ran = [c.key for c in out.facts.items]
    rows = _rows(out, before)
    assert before.measured == {} and set(rows) == set(ran) and "baseline" in ran
    assert out.facts.runs >= 2 and out.facts.rounds >= 6
    assert all(r.stage == "screen" for r in rows.values())
    assert set(out.facts.latencies) == set(ran) and before.latencies == {}


def test_cpu_cost_returns_the_baselines_and_the_thread_candidates(alone: Any) -> None:
    out, _ = alone["CPU cost"]
    cpu = out.facts.cpu
    assert cpu is not None and "baseline" in cpu.rows
    assert all(r.cpu_ms > 0 for r in cpu.rows.values())


def test_accuracy_returns_the_variants_rows_with_their_cosine(alone: Any) -> None:
    out, before = alone["accuracy"]
    samples = out.facts.samples
    assert samples is not None and samples.samples and before.samples is None
    variants = {c.key for c in alone["screen"][0].facts.items if c.parsed.is_variant}
    rows = _rows(out, before)
    assert set(rows) == variants  # the variants: the settings share the model's outputs
    assert set(out.facts.outputs) == {"baseline", *variants}  # carried for the later stages
    row = rows["variant:quant-dynamic"]
    assert 0.9 < row.cosine <= 1.0 + 1e-9
    assert row.paired == before.measured["variant:quant-dynamic"].paired  # with a cosine


def test_quantization_fix_returns_the_candidates_with_any_fix(alone: Any) -> None:
    out, before = alone["quantization fix"]
    low = {
        k
        for k, r in before.measured.items()
        if CandidateKey.parse(k).arg in QUANTIZED and not before.accurate(r)
    }
    assert set(out.facts.quant_fixes) == low  # only the inaccurate int8 variants get fixes
    screened = [c.key for c in alone["screen"][0].facts.items]
    assert [c.key for c in out.facts.items][: len(screened)] == screened  # fixes added after


def test_combine_returns_final_rows_against_the_baseline_or_says_why_not(alone: Any) -> None:
    out, before = alone["combine"]
    rows = _rows(out, before)
    assert all(r.stage == "final" for r in rows.values())
    assert rows or out.said.notes or out.said.skipped  # nothing faster, or no time: said


def test_explain_returns_a_signal_only_for_slower_variants(alone: Any) -> None:
    out, before = alone["explain"]
    slower = {
        r.variant for k, r in before.measured.items() if k.startswith("variant:") and r.slower
    }
    assert {s.variant for s in out.facts.variant_signals} <= slower


def test_a_stages_notes_are_its_own() -> None:
    """What the budget or a failed candidate says while a stage runs goes to that stage's
    outcome, not to the one before (each stage spends a budget of its own); folded, each is
    said once, in order."""
    budget = Budget(120.0, time.perf_counter())
    one, two = budget.for_stage(), budget.for_stage()
    one.skip("left out in one")
    two.skip("left out in two")
    two.skip("left out in one")
    assert one.said.skipped == ("left out in one",)
    assert one.said.then(two.said).skipped == ("left out in one", "left out in two")


def test_the_generation_stage_alone_returns_its_trials() -> None:
    """A decoder's generation stage alone: the baseline's generation and the candidates
    generated against it come back in the outcome (notes with it), nothing in what it read."""
    import functools as ft

    from ortlab.diagnosis.generation import generation_stage

    m = ortlab.examples.load("tiny_llama_int4")
    run = edge(m, SessionConfig(fallback="allow"), None, progress=False)
    budget = Budget(60.0, time.perf_counter())
    facts = search.observe(run, budget.for_stage(), min_cosine=0.999).folded()
    out = run_stage(ft.partial(generation_stage, logical=2), run, budget, facts)
    g = out.facts.generation
    assert g is not None and g.baseline.decode_tokens_per_s[0] > 0 and g.trials
    assert all(t.decode.rounds == g.rounds for t in g.trials)
    assert any(n.startswith("Generation trials:") for n in out.said.notes)
    assert facts.generation is None and out.facts.measured == {}
