"""Each doctor stage run alone (issue 48 item 1): a stage reads the ledger and the facts so far
and returns its Outcome; it writes nothing the next stage reads until ``doctor()`` folds it.

The stages run here one at a time on the MLP with the real worker, in the doctor's order, each
outcome checked on its own before it is folded by hand: what a test of one stage, a reordered
plan or a new stage builds on.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import pytest

import ortlab
from ortlab.core.config import SessionConfig
from ortlab.diagnosis import search
from ortlab.diagnosis.cpu import search_cpu
from ortlab.diagnosis.facts import QUANTIZED, CandidateKey
from ortlab.diagnosis.ledger import Ledger
from ortlab.diagnosis.outcome import Got, Outcome, begin, run_stage
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
def alone() -> dict[str, tuple[Outcome, dict[str, Any], Ledger]]:
    """Each stage's outcome, with the ledger's rows as they were before it ran (and the
    ledger), the stages before it folded in order."""
    m = ortlab.load(ortlab.examples.mlp())
    run = edge(m, SessionConfig(fallback="allow"), None, progress=False)
    ledger = Ledger(run, budget_s=120.0, min_cosine=0.999, t0=time.perf_counter())
    first = search.observe(ledger, begin(ledger, "observe"))
    assert first.observed is not None
    got = Got(first.observed)
    out: dict[str, tuple[Outcome, dict[str, Any], Ledger]] = {"observe": (first, {}, ledger)}
    got.fold(first, ledger)
    for name, stage in PLAN:
        before = dict(ledger.measured)
        outcome = run_stage(stage, name, ledger, got)
        assert ledger.measured == before, f"{name} wrote the ledger's rows itself"
        out[name] = (outcome, before, ledger)
        got.fold(outcome, ledger)
    return out


def test_observe_returns_the_baseline_it_saw(alone: Any) -> None:
    out, _, ledger = alone["observe"]
    assert out.observed is not None and out.profile is not None
    assert out.observed.model_name == "mlp" and out.observed.profiled_ms > 0
    assert ledger.profile is out.profile  # folded: later stages read it


def test_memory_returns_the_footprint_or_says_why_not(alone: Any) -> None:
    out, _, _ = alone["memory"]
    assert out.footprint is not None or out.said.skipped, out.said
    if out.footprint is not None:
        assert out.footprint.to_pandas()["peak_bytes"].gt(0).all()


def test_build_returns_the_candidates_baseline_first(alone: Any) -> None:
    out, _, _ = alone["build variants"]
    keys = [c.key for c in out.items or []]
    assert keys[0] == "baseline" and "variant:quant-dynamic" in keys
    assert out.rows == {} and out.fusion is not None


def test_screen_returns_a_row_per_candidate_that_ran(alone: Any) -> None:
    out, before, _ = alone["screen"]
    ran = [c.key for c in out.items or []]
    assert before == {} and set(out.rows) == set(ran) and "baseline" in ran
    runs, rounds = out.timing or (0, 0)
    assert runs >= 2 and rounds >= 6
    assert all(r.stage == "screen" for r in out.rows.values())


def test_cpu_cost_returns_the_baselines_and_the_thread_candidates(alone: Any) -> None:
    out, _, _ = alone["CPU cost"]
    assert out.cpu is not None and "baseline" in out.cpu.rows
    assert all(r.cpu_ms > 0 for r in out.cpu.rows.values())


def test_accuracy_returns_the_variants_rows_with_their_cosine(alone: Any) -> None:
    out, before, _ = alone["accuracy"]
    assert out.samples is not None and out.samples.samples
    variants = {c.key for c in alone["screen"][0].items if c.parsed.is_variant}
    assert set(out.rows) == variants  # the variants: the settings share the model's outputs
    row = out.rows["variant:quant-dynamic"]
    assert 0.9 < row.cosine <= 1.0 + 1e-9
    assert row.paired == before["variant:quant-dynamic"].paired  # the screen's, with a cosine


def test_quantization_fix_returns_the_candidates_with_any_fix(alone: Any) -> None:
    out, before, ledger = alone["quantization fix"]
    low = {
        k
        for k, r in before.items()
        if CandidateKey.parse(k).arg in QUANTIZED and not ledger.accurate(r)
    }
    assert set(out.quant_fixes) == low  # only the inaccurate int8 variants get fixes
    screened = [c.key for c in alone["screen"][0].items]
    assert [c.key for c in out.items or []][: len(screened)] == screened  # fixes added after


def test_combine_returns_final_rows_against_the_baseline_or_says_why_not(alone: Any) -> None:
    out, _, _ = alone["combine"]
    assert all(r.stage == "final" for r in out.rows.values())
    assert out.rows or out.said.notes or out.said.skipped  # nothing faster, or no time: said


def test_explain_returns_a_signal_only_for_slower_variants(alone: Any) -> None:
    out, before, _ = alone["explain"]
    slower = {r.variant for k, r in before.items() if k.startswith("variant:") and r.slower}
    assert {s.variant for s in out.signals or []} <= slower


def test_a_stages_notes_are_its_own() -> None:
    """What the budget or a failed candidate says while a stage runs goes to that stage's
    outcome, not to the one before (each stage begins its own)."""
    m = ortlab.load(ortlab.examples.mlp())
    run = edge(m, SessionConfig(fallback="allow"), None, progress=False)
    ledger = Ledger(run, budget_s=120.0, min_cosine=0.999, t0=time.perf_counter())
    one, two = begin(ledger, "one"), None
    ledger.skip("left out in one")
    two = begin(ledger, "two")
    ledger.skip("left out in two")
    assert one.said.skipped == ["left out in one"] and two.said.skipped == ["left out in two"]
    assert ledger.budget.skipped == ["left out in one", "left out in two"]  # said once, last


def test_the_generation_stage_alone_returns_its_trials() -> None:
    """A decoder's generation stage alone: the baseline's generation and the candidates
    generated against it come back in the outcome (notes with it), nothing in the ledger."""
    from ortlab.diagnosis.generation import generation_stage

    m = ortlab.examples.load("tiny_llama_int4")
    run = edge(m, SessionConfig(fallback="allow"), None, progress=False)
    ledger = Ledger(run, budget_s=60.0, min_cosine=0.999, t0=time.perf_counter())

    def stage(led: Ledger, _: Got, out: Outcome) -> Outcome:
        out.generation = generation_stage(led, cores=2, logical=2)
        return out

    seen = search.observe(ledger, begin(ledger, "observe")).observed
    assert seen is not None
    out = run_stage(stage, "generation", ledger, Got(seen))
    g = out.generation
    assert g is not None and g.baseline.decode_tokens_per_s[0] > 0 and g.trials
    assert all(t.decode.rounds == g.rounds for t in g.trials)
    assert any(n.startswith("Generation trials:") for n in out.said.notes)
    assert ledger.measured == {}
