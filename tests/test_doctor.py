"""The doctor: each rule fires on facts that show its problem and stays quiet on a healthy
session (facts built by hand: no timing is asserted), the search's plumbing on fake worker
answers, then a few real doctor runs in the worker on models made to show a problem, the
report, and the CLI. Real runs fix their rounds and give a budget far above what they need, so
what they assert does not depend on how fast (or busy) the machine is."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import subprocess
import sys
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnx
import pytest

import ortlab
from ortlab.analysis.quantization.compare import Signal
from ortlab.core.config import SessionConfig
from ortlab.core.inputs import Feeds
from ortlab.core.run import Run
from ortlab.core.stats import MIN_ROUNDS, NOISE_BAND, Paired
from ortlab.diagnosis import measure, rules, search
from ortlab.diagnosis.budget import Budget
from ortlab.diagnosis.doctor import cpu_sample, other_cores
from ortlab.diagnosis.facts import (
    Candidate,
    CandidateFailure,
    Facts,
    Finding,
    Measured,
    Observed,
    load_caveat,
)
from ortlab.diagnosis.outcome import Outcome, run_stage
from ortlab.engine.session import ProviderIssue, SessionReport
from tests import models
from tests.models import facts_of, measured
from tests.test_placement import _replay

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
BERT_OPS = {"MatMul": 16, "Softmax": 2, "Add": 30, "LayerNormalization": 5, "Gelu": 2}
RESNET_OPS = {"Conv": 53, "Relu": 49, "Add": 16, "MaxPool": 1, "Gemm": 1}


def _report(
    requested: tuple[str, ...] = (CPU,),
    active: tuple[str, ...] = (CPU,),
    missing: tuple[tuple[str, str], ...] = (),
) -> SessionReport:
    return SessionReport(
        requested=list(requested),
        active=list(active),
        missing=[ProviderIssue(p, r) for p, r in missing],
        level="all",
        create_ms=1.0,
        ort_version="1.31.1",
    )


_m = measured  # the one test maker of a measured row (tests.models)


def _facts(**kw: Any) -> Facts:
    base: dict[str, Any] = {
        "model_name": "m",
        "requested": SessionConfig(),
        "report": _report(),
        "op_counts": dict(RESNET_OPS),
        "baseline_ms": 10.0,
        "cores": 2,
    }
    base.update(kw)
    return facts_of(**base)


def _observed(**kw: Any) -> Observed:
    """What the observe stage saw, for the search's stages (the first facts hold it)."""
    base: dict[str, Any] = {
        "model_name": "m",
        "requested": SessionConfig(),
        "report": _report(),
        "op_counts": dict(RESNET_OPS),
        "profiled_ms": 10.0,
        "cores": 2,
    }
    base.update(kw)
    return Observed(**base)


def _rules(f: Facts, rule: str) -> list[Finding]:
    return [x for x in rules.run_rules(f) if x.rule == rule]


HEALTHY = _facts(
    measured={
        "baseline": _m("baseline", 1.0, 1.0, 1.0),
        "level:all": _m("level:all", 0.99, 0.95, 1.03),
        "threads:1": _m("threads:1", 1.4, 1.3, 1.5),
        "iobinding": _m("iobinding", 1.0, 0.97, 1.02),
    },
    profiled_ms=10.5,
)


def test_a_healthy_session_has_no_findings() -> None:
    assert rules.run_rules(HEALTHY) == []


def test_ep_fallback_fires_with_orts_reason() -> None:
    f = _facts(
        requested=SessionConfig(["cuda", "cpu"]),
        report=_report(
            (CUDA, CPU), (CPU,), ((CUDA, "libcublasLt.so.13: cannot open shared object file"),)
        ),
    )
    (x,) = _rules(f, "ep_fallback")
    assert x.severity == "error" and "libcublasLt.so.13" in x.evidence
    assert "CUDA did not load" in x.title and "not measurable here" in x.gain
    assert rules.run_rules(f)[0] is not None and rules.run_rules(f)[0].rule == "ep_fallback"
    assert _rules(HEALTHY, "ep_fallback") == []


def test_ep_islands_from_the_openvino_placement() -> None:
    pl = _replay()
    f = _facts(placement=pl, measured={"cpu-only": _m("cpu-only", 1.3, 1.2, 1.4)})
    (x,) = _rules(f, "ep_islands")
    assert "2 OpenVINO partition(s) and 1 CPU island(s)" in x.evidence
    assert "IsNaN" in x.evidence and "2 tensors cross" in x.evidence
    assert "81,920 bytes" in x.evidence  # 65,536 + 16,384 (the fixture's boundary tensors)
    assert x.nodes == ["/sanitize/IsNaN"]
    assert x.gain.startswith("the same model on the CPU EP alone: ") and x.saved_ms == 0
    assert "no reason given (1 node" in x.evidence, "the fixture has no probe: said so"
    assert _rules(HEALTHY, "ep_islands") == []
    (probed,) = _rules(_facts(placement=_replay({"/sanitize/IsNaN": "refused"})), "ep_islands")
    assert "op not supported: IsNaN (1 node, e.g. /sanitize/IsNaN)" in probed.evidence
    assert probed.fix.startswith("op not supported: IsNaN: not supported by OpenVINO")


def test_optimization_level_below_extended_with_its_measured_gain() -> None:
    f = _facts(
        requested=SessionConfig(level="basic"),
        measured={"level:all": _m("level:all", 0.6, 0.55, 0.65, p50=6.0)},
    )
    (x,) = _rules(f, "optimization_level")
    assert "'basic'" in x.title and x.ratio == 0.6 and x.saved_ms == pytest.approx(4.0)
    assert x.gain == "verdict of level:all"
    for level in ("extended", "layout", "all"):
        assert _rules(_facts(requested=SessionConfig(level=level)), "optimization_level") == []


def test_unfused_transformer_with_export_advice() -> None:
    f = _facts(
        op_counts=dict(BERT_OPS),
        attention_reason="the graph comes from PyTorch's SDPA",
        transformer_fused={"SkipLayerNormalization": 4},
        measured={"variant:transformers": _m("variant:transformers", 0.8, 0.7, 0.9)},
    )
    (x,) = _rules(f, "unfused_transformer")
    assert "16 MatMul, 2 Softmax" in x.evidence and "fused 4 SkipLayerNormalization" in x.evidence
    assert "SDPA" in x.fix and x.ratio == 0.8
    assert _rules(HEALTHY, "unfused_transformer") == []  # a CNN
    fused = _facts(op_counts={**BERT_OPS, "Attention": 2})
    assert _rules(fused, "unfused_transformer") == []  # already optimized


def test_initializer_inputs_blocker() -> None:
    m = ortlab.load(models.initializers_as_inputs())
    from ortlab.analysis.optimizers.levels import initializer_input_blocker

    f = _facts(
        initializer_blocker=initializer_input_blocker(m),
        measured={
            "variant:no-initializer-inputs": _m("variant:no-initializer-inputs", 0.7, 0.6, 0.8)
        },
    )
    (x,) = _rules(f, "initializer_inputs")
    assert "5 initializers are also listed as graph inputs" in x.evidence
    assert "without_initializer_inputs" in x.code and x.ratio == 0.7
    assert initializer_input_blocker(ortlab.load(ortlab.examples.mlp())) is None


def test_thread_sweep_curve_and_contention() -> None:
    sweep = {
        "threads:1": _m(
            "threads:1", 0.8, 0.75, 0.85, p50=8.0, config=SessionConfig(intra_op_threads=1)
        ),
        "threads:2": _m("threads:2", 1.0, 0.97, 1.03),
        "spin:off": _m("spin:off", 1.01, 0.98, 1.04),
    }
    (x,) = _rules(_facts(measured=sweep), "threads")
    assert x.title == "threads:1 is faster than the thread settings asked for"
    assert "intra_op_threads=1" in x.code and "spin:off" in x.evidence.replace(
        "no-spin", "spin:off"
    )
    assert x.evidence.count("ms (") == 3  # the whole curve, not just the winner
    over = _rules(
        _facts(
            requested=SessionConfig(intra_op_threads=16),
            cores=2,
            measured={"threads:2": _m("threads:2", 1.0, 0.97, 1.03)},
        ),
        "threads",
    )
    assert len(over) == 1 and "more than the 2 physical cores" in over[0].title
    assert _rules(HEALTHY, "threads") == []


def test_thread_advice_measured_under_load_says_so() -> None:
    sweep = {
        "threads:1": _m(
            "threads:1", 0.5, 0.45, 0.55, p50=5.0, config=SessionConfig(intra_op_threads=1)
        )
    }
    busy = _facts(measured=sweep, other_cpu={"screen": 1.4, "combine": 0.9}, logical_cpus=2)
    (x,) = _rules(busy, "threads")
    assert (
        "measured while other processes used 1.4 of 2 cores: this advice holds for a busy "
        "machine; re-run the doctor idle"
    ) in x.evidence
    assert x.title.endswith("(measured under load)")
    over = _facts(
        requested=SessionConfig(intra_op_threads=16), measured=sweep, other_cpu={"combine": 0.6}
    )
    assert all("other processes used 0.6 cores" in y.evidence for y in _rules(over, "threads"))
    # idle while timing; busy while observing (not a timing stage): no caveat
    idle = _facts(
        measured=sweep, other_cpu={"observe": 1.9, "screen": 0.1, "combine": 0.2}, logical_cpus=2
    )
    (y,) = _rules(idle, "threads")
    assert "other processes" not in y.evidence and "under load" not in y.title


def test_candidate_failures_become_warnings() -> None:
    f = _facts(
        failures=[
            CandidateFailure(
                "static QDQ minmax per-channel",
                "AssertionError: (no message)",
                "build",
                "ortlab.quantize(model, mode='static', format='qdq', per_channel=True)",
            ),
            CandidateFailure(
                "candidate iobinding (original · cpu · all · iobinding)",
                "RuntimeError: Invalid rank for output: y Got: 2 Expected: 1\nmore of ORT's words",
                "timing",
            ),
            CandidateFailure("variant 0 (x.onnx)", "", "build"),
        ]
    )
    xs = _rules(f, "candidate_failed")
    assert [x.title for x in xs] == [
        "static QDQ minmax per-channel fails: AssertionError: (no message)",
        "candidate iobinding (original · cpu · all · iobinding) fails: RuntimeError: Invalid "
        "rank for output: y Got: 2 Expected: 1",
        "variant 0 (x.onnx) fails: (no message)",
    ]
    assert {x.severity for x in xs} == {"warning"}
    assert xs[1].evidence.endswith("more of ORT's words") and "session" in xs[1].fix
    assert "per_channel=True" in xs[0].code and xs[0].gain.startswith("not measured")
    assert _rules(HEALTHY, "candidate_failed") == []


def test_quantization_opportunity_shows_the_accuracy_cost() -> None:
    f = _facts(
        op_counts=dict(BERT_OPS),
        measured={
            "variant:quant-dynamic": _m(
                "variant:quant-dynamic", 0.8, 0.75, 0.86, cosine=0.9991, variant="m [dynamic int8]"
            ),
            "variant:quant-static": _m(
                "variant:quant-static", 0.5, 0.45, 0.55, cosine=0.91, variant="m [static QDQ]"
            ),
        },
    )
    found = {x.title.split(":")[0]: x for x in _rules(f, "quantization")}
    assert "output cosine 0.9991" in found["m [dynamic int8]"].evidence
    assert "mode='dynamic'" in found["m [dynamic int8]"].code
    assert "below 0.999, so the doctor did not pick it" in found["m [static QDQ]"].evidence
    assert _rules(HEALTHY, "quantization") == []


def test_slower_variant_explained_by_its_kernels() -> None:
    slow = _m("variant:quant-dynamic", 7.1, 6.8, 7.4, p50=71.0, variant="resnet50 [dynamic int8]")
    sig = Signal(
        "resnet50 [dynamic int8]",
        "conv-heavy model quantized dynamically",
        "53 convolutions ran as ConvInteger",
        "use static quantization (QDQ)",
    )
    (x,) = _rules(_facts(measured={slow.key: slow}, variant_signals=[sig]), "slow_variant")
    assert "ConvInteger" in x.evidence and "static quantization" in x.fix
    assert x.saved_ms == pytest.approx(61.0)  # sorted by what it costs
    fast = _m("variant:quant-dynamic", 0.8, 0.7, 0.9, variant="x")
    assert _rules(_facts(measured={fast.key: fast}), "slow_variant") == []


def test_io_binding_for_small_models() -> None:
    f = _facts(baseline_ms=0.2, measured={"iobinding": _m("iobinding", 0.85, 0.8, 0.9, p50=0.17)})
    (x,) = _rules(f, "io_binding")
    assert "200 µs" in x.evidence and "run_with_iobinding" in x.code
    assert _rules(HEALTHY, "io_binding") == []


def test_tensorrt_with_dynamic_shapes() -> None:
    f = _facts(
        requested=SessionConfig(["trt", "cuda", "cpu"]),
        symbolic_inputs={"input_ids": ["batch", "sequence"]},
    )
    (x,) = _rules(f, "trt_dynamic_shapes")
    assert "batch, sequence" in x.evidence and "trt_profile_min_shapes" in x.code
    assert "TensorRT did not load" in x.gain
    assert _rules(_facts(requested=SessionConfig(["trt", "cpu"])), "trt_dynamic_shapes") == []
    assert _rules(_facts(symbolic_inputs={"x": ["n"]}), "trt_dynamic_shapes") == []


def test_cuda_graph_eligibility() -> None:
    (x,) = _rules(_facts(requested=SessionConfig(["cuda", "cpu"])), "cuda_graph")
    assert "enable_cuda_graph" in x.code and "CUDA did not load" in x.gain
    loop = _facts(requested=SessionConfig(["cuda", "cpu"]), op_counts={"Loop": 1, "Add": 2})
    assert _rules(loop, "cuda_graph") == []
    dyn = _facts(requested=SessionConfig(["cuda", "cpu"]), symbolic_inputs={"x": ["n"]})
    assert _rules(dyn, "cuda_graph") == []
    assert _rules(HEALTHY, "cuda_graph") == []


def test_profiling_overhead_on_tiny_models() -> None:
    """The screen's baseline (profiling off) against the observe stage's profiled median."""

    def timed(p50: float, profiled_ms: float) -> Facts:
        base = _m("baseline", 1.0, 1.0, 1.0, p50=p50)
        return _facts(measured={"baseline": base}, profiled_ms=profiled_ms)

    (x,) = _rules(timed(0.1, 0.3), "profiling_overhead")
    assert "3.0x" in x.title and x.severity == "info"
    assert _rules(timed(40.0, 60.0), "profiling_overhead") == []


def test_findings_sorted_errors_first_then_by_cost() -> None:
    f = _facts(
        requested=SessionConfig(["cuda", "cpu"], level="disabled"),
        report=_report((CUDA, CPU), (CPU,), ((CUDA, "no CUDA"),)),
        initializer_blocker="blocked",
        measured={
            "level:all": _m("level:all", 0.5, 0.45, 0.55, p50=5.0),
            "variant:no-initializer-inputs": _m(
                "variant:no-initializer-inputs", 0.9, 0.85, 0.95, p50=9.0
            ),
        },
    )
    order = [x.rule for x in rules.run_rules(f)]
    assert order[0] == "ep_fallback"
    assert order.index("optimization_level") < order.index("initializer_inputs")


# ---------------------------------------------------------------------- machine load


class _FakeProc:
    """psutil.Process as far as the doctor reads it."""

    def __init__(
        self,
        user: float,
        system: float,
        children: tuple[_FakeProc, ...] = (),
        reaped: tuple[float, float] = (0.0, 0.0),
        gone: bool = False,
    ) -> None:
        self.times = SimpleNamespace(
            user=user, system=system, children_user=reaped[0], children_system=reaped[1]
        )
        self._children, self.gone = children, gone

    def cpu_times(self) -> Any:
        import psutil

        if self.gone:
            raise psutil.NoSuchProcess(4242)
        return self.times

    def children(self, recursive: bool = False) -> list[_FakeProc]:
        assert recursive  # the worker's own children count too
        return list(self._children)


def _fake_psutil(busy: float, tree: _FakeProc) -> Any:
    """All CPUs together: ``busy`` CPU-seconds working, idle and iowait must not count."""
    times = SimpleNamespace(
        user=busy * 0.5,
        nice=busy * 0.1,
        system=busy * 0.3,
        irq=busy * 0.05,
        softirq=busy * 0.05,
        idle=1000.0 + busy,
        iowait=50.0 + busy,
    )
    return SimpleNamespace(cpu_times=lambda: times, cpu_count=lambda: 2, Process=lambda: tree)


def test_other_processes_cpu_from_fake_counters() -> None:
    import time as clock

    # caller 1.5 CPU-s, its worker 3.5, and a child that ended while being listed
    before = cpu_sample(
        _fake_psutil(20.0, _FakeProc(1.0, 0.5, (_FakeProc(3.0, 0.5), _FakeProc(9, 9, gone=True))))
    )
    # 2 s later: the machine worked 4.8 CPU-s more; the caller 0.5 more; the worker ended at
    # 4.0 + 0.8 and was waited for (its time moved to the caller's children_*), a new one
    # used 0.2: this process tree used 2.0 of the 4.8
    after = cpu_sample(
        _fake_psutil(24.8, _FakeProc(1.3, 0.7, (_FakeProc(0.2, 0.0),), reaped=(4.0, 0.8)))
    )
    after = dataclasses.replace(after, wall_s=before.wall_s + 2.0)  # a fake clock
    assert (before.busy_s, before.own_s, before.cpus) == (pytest.approx(20.0), 5.0, 2)
    assert other_cores(before, after) == pytest.approx(1.4)
    quiet = dataclasses.replace(after, busy_s=before.busy_s + 1.0)  # counter skew
    assert other_cores(before, quiet) == 0.0
    assert math.isnan(other_cores(before, before))
    # a doctor stage of 3 ms (its combine, when nothing was left to combine): counter skew
    # over it read as 2.0 of 2 cores busy; too short to tell gets no figure, not a busy machine
    from ortlab.diagnosis.doctor import _Stages

    stages = _Stages(clock.perf_counter())
    stages.done("combine")
    assert "combine" not in stages.load


def test_the_bests_sentence_is_composed_by_the_view_from_its_measurements() -> None:
    """Best carries its measurements as data (a decoder's generation, the latency beside a
    CPU verdict, the caveat); one view function composes the sentence every view shows —
    the doctor's text and HTML, the snippet's header, ``repr``."""
    from ortlab.views.doctor import best_snippet, best_verdict

    step = Paired(0.8, 0.7, 0.9, "1.25x faster")
    gen = Paired(0.95, 0.9, 1.02, "no measurable difference")
    best = ortlab.Best(SessionConfig(intra_op_threads=1), "original", "m.onnx", [], step, 1.0)
    assert best_verdict(best) == "1.25x faster"
    decoder = dataclasses.replace(best, generation=gen, caveat="measured busy")
    said = best_verdict(decoder)
    assert said == (
        "in generation: no measurable difference; on one decode step (the timed inputs): "
        "1.25x faster; measured busy"
    )
    assert said in repr(decoder) and said in best_snippet(decoder).splitlines()[0]
    assert said in decoder.snippet()
    cpu = dataclasses.replace(best, objective="cpu", latency=gen)
    assert best_verdict(cpu) == "1.25x faster; latency: no measurable difference"
    assert decoder.paired is step and cpu.paired is step  # the measurement itself untouched


def test_a_best_that_changes_threads_carries_the_load_caveat() -> None:
    from ortlab.diagnosis.doctor import _with_caveat
    from ortlab.views.doctor import best_verdict

    caveat = load_caveat(_facts(other_cpu={"screen": 1.4}, logical_cpus=2))
    threads = ortlab.Best(
        SessionConfig(intra_op_threads=1),
        "original",
        "m.onnx",
        [],
        Paired(0.5, 0.45, 0.55, "threads:1 is 2.00x faster"),
        1.0,
    )
    flagged = _with_caveat(threads, SessionConfig(), caveat)
    assert flagged.caveat == caveat and flagged.paired == threads.paired  # data, not prose
    assert best_verdict(flagged) == f"threads:1 is 2.00x faster; {caveat}"  # the view says it
    assert caveat in flagged.snippet() and "1.4 of 2 cores" in caveat
    level = dataclasses.replace(threads, config=SessionConfig(level="basic"))
    assert _with_caveat(level, SessionConfig(), caveat) == level  # not about threads
    assert _with_caveat(threads, SessionConfig(), "") == threads  # an idle machine


# ---------------------------------------------------------------------- the search, fake worker


def _search(budget_s: float = 600.0, m: Any = None) -> tuple[Run, Budget]:
    """What a doctor's stages read besides the facts: its Run and its budget (each stage below
    runs alone on them)."""
    model = m or ortlab.load(ortlab.examples.mlp())
    run = Run(model, SessionConfig(), Feeds({}), progress=False)
    return run, Budget(budget_s, time.perf_counter())


def _fake_worker(monkeypatch: pytest.MonkeyPatch, answers: list[dict[str, Any]]) -> None:
    from ortlab.engine.replies import InterleavedReply
    from ortlab.engine.worker import task_name

    def call(
        task: str | Callable[..., object], kwargs: dict[str, Any], *_: Any
    ) -> InterleavedReply:
        assert task_name(task) == "ortlab.engine.tasks_timing:interleaved"
        out = answers.pop(0)
        assert len(out["medians_ns"]) == kwargs["rounds"]
        no_report = [None] * len(kwargs["items"])  # no session: no report
        return InterleavedReply(**{"reports": no_report, "failed": {}, **out})

    monkeypatch.setattr("ortlab.engine.calls.call", call)  # measure_interleaved's worker call


def test_time_drops_candidates_the_worker_could_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    run, budget = _search()
    m, spend = run.model, budget.for_stage()
    items = [
        Candidate("baseline", m, SessionConfig(), []),
        Candidate("iobinding", m, SessionConfig(io_binding=True), []),
        Candidate("threads:1", m, SessionConfig(intra_op_threads=1), []),
    ]
    nan, rank = math.nan, "RuntimeError: Invalid rank for output: y Got: 2 Expected: 1"
    _fake_worker(
        monkeypatch,
        [
            # a NaN column for the failed one …
            {
                "medians_ns": [[1e6, nan, 2e6]] * 6,
                "latencies_ns": [[1e6], [], [2e6]],
                "failed": {1: rank},
            },
            # … or only the columns of those that ran (keys may come back as text)
            {"medians_ns": [[1e6, 2e6]] * 6, "latencies_ns": [[1e6], [2e6]], "failed": {"1": rank}},
            # a worker that reports no failures: everything as before
            {"medians_ns": [[1e6, 3e6, 2e6]] * 6, "latencies_ns": [[1e6], [3e6], [2e6]]},
        ],
    )
    latencies: dict[str, tuple[int, ...]] = {}
    for _ in range(2):
        t = measure.time_items(run, spend, items, 6, 3, desc="test")
        assert [it.key for it in t.ran] == ["baseline", "threads:1"]
        assert t.medians_ms.shape == (6, 2) and np.all(t.medians_ms == [1.0, 2.0])
        latencies = measure.with_latencies(latencies, t.latencies)
    t = measure.time_items(run, spend, items, 6, 3, desc="test")
    assert t.medians_ms.shape == (6, 3) and len(t.ran) == 3
    latencies = measure.with_latencies(latencies, t.latencies)
    failures = spend.said.failures
    assert [(x.what, x.message, x.stage) for x in failures] == [
        ("candidate iobinding (original · cpu · all · iobinding)", rank, "timing")
    ] * 2
    assert "io_binding" in failures[0].code
    assert latencies == {"baseline": (1e6,) * 3, "threads:1": (2e6,) * 3, "iobinding": (3e6,)}


def test_screen_on_a_budget_too_small_gives_no_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    """0.1 s per run, 1 s of budget: 6 rounds do not fit, so the screen runs 2 and says that
    no verdict is possible — even for a candidate twice as fast in every round."""
    run, budget = _search(budget_s=1.0)
    m = run.model
    items = (
        Candidate("baseline", m, SessionConfig(), []),
        Candidate("level:all", m, SessionConfig(level="all"), []),
    )
    facts = Facts(_observed(profiled_ms=100.0), items=items)
    _fake_worker(monkeypatch, [{"medians_ns": [[1e8, 5e7]] * 2, "latencies_ns": [[1e8], [5e7]]}])
    out = run_stage(search.screen, run, budget, facts)  # the stage alone
    after = out.facts
    assert len(after.items) == 2 and (after.runs, after.rounds) == (2, 2)
    assert facts.measured == {} and facts.rounds == 0  # what it read is as it was
    assert after.latencies == {"baseline": (1e8,), "level:all": (5e7,)}
    assert out.said.notes == ()  # what the budget left out is said once, last: its note
    (short,) = out.said.skipped
    assert "had no room for 6 rounds, the fewest a 95 % verdict needs; it ran 2" in short
    note = budget.left_out(out.folded().said)
    assert note.startswith("verdicts in the screen: ")
    # 2 x (6 rounds x 2 runs + 3 warm-up runs) x 0.1 s / 0.35
    assert note.endswith("raise budget_s to about 9 s to measure them")
    v = after.measured["level:all"]
    assert not v.faster and math.isnan(v.paired.low) and math.isnan(v.confidence)
    assert "not enough rounds for a verdict (need ≥ 6" in v.paired.verdict
    assert v.paired.ratio == 0.5


def test_facts_fold_stage_by_stage() -> None:
    """One type carries the facts: a stage reads them frozen and returns new ones with what it
    said; folding adds what it said after the others'. The baseline's latency is the screen's
    median when the screen timed it, else the profiled one."""
    from ortlab.diagnosis.facts import Said, TransformerFusion

    seen = _observed(profiled_ms=12.0)
    before = Facts(seen, fusion=TransformerFusion({"Attention": 2}), said=Said(notes=("seen",)))
    base = _m("baseline", 1.0, 1.0, 1.0, p50=9.5)
    timed = dataclasses.replace(before, measured={"baseline": base})
    after = Outcome(timed, Said(notes=("timed",), skipped=("x",), need_s=3.0)).folded()
    assert (before.baseline_ms, after.baseline_ms) == (12.0, 9.5)
    assert after.seen is seen  # what the first stage saw is held, not copied field by field
    assert after.transformer_fused == {"Attention": 2}
    assert after.said.notes == ("seen", "timed") and before.said.notes == ("seen",)
    assert after.said.then(Said(skipped=("x",))).skipped == ("x",)  # said once
    with pytest.raises(dataclasses.FrozenInstanceError):
        after.measured = {}  # type: ignore[misc]


def test_plan_keeps_6_rounds_when_the_budget_allows() -> None:
    _, budget = _search(budget_s=600.0)
    spend = budget.for_stage()
    runs, rounds = measure.plan(spend, Facts(_observed(profiled_ms=100.0)), 10, 0.35, "screen")
    assert rounds >= MIN_ROUNDS and runs >= 2 and spend.said.skipped == ()


def test_a_failing_variant_build_is_a_failure_not_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """ORT's quantizer raises AssertionError() with no message (ortlab used to index the first
    line of the empty message): the other candidates are still built."""

    def broken(*_: Any, **__: Any) -> Any:
        raise AssertionError

    monkeypatch.setattr("ortlab.diagnosis.candidates.make_quantized", broken)
    run, budget = _search()
    seen = _observed(op_time_share={"Conv": 0.8, "MatMul": 0.1})
    build = functools.partial(search.candidates, quantize=True, transformers=False)
    out = run_stage(build, run, budget, Facts(seen))
    keys = [it.key for it in out.facts.items]
    assert "variant:quant-static" not in keys and {"baseline", "spin:off"} <= set(keys)
    (x,) = out.said.failures
    assert (x.what, x.message, x.stage) == (
        "static QDQ minmax per-channel",
        "AssertionError: (no message)",
        "build",
    )
    assert x.code == "ortlab.quantize(model, mode='static', format='qdq', per_channel=True)"


def test_best_when_nothing_wins_has_no_interval() -> None:
    facts = _facts(
        measured={
            "baseline": _m("baseline", 1.0, 1.0, 1.0),
            "level:all": _m("level:all", 0.99, 0.95, 1.03),
        }
    )
    run, _ = _search()
    b = search.best(run, facts)
    assert b.variant == "original" and b.paired.ratio == 1.0
    assert math.isnan(b.paired.low) and math.isnan(b.paired.high)
    assert b.paired.verdict == "no candidate was measurably faster than the baseline"


# ---------------------------------------------------------------------- real doctor runs


# Budgets far above what these runs need, and fixed rounds: the doctor stops when its stages
# are done, so what the tests assert never depends on how much a budget reaches on a busy machine.
BUDGET = 600


@pytest.fixture(scope="module")
def conv_doctor() -> ortlab.DoctorResult:
    # rounds=4 asks for fewer than a 95 % interval needs: the doctor raises it to 6. No
    # memory stage (its fresh processes are half this run; test_memory checks the doctor's)
    return ortlab.doctor(
        ortlab.examples.conv_bn_relu(),
        {"level": "disabled"},
        budget_s=BUDGET,
        rounds=4,
        memory=False,
        progress=False,
    )


@pytest.mark.slow
def test_a_doctor_that_measured_nothing_still_draws(conv_doctor: ortlab.DoctorResult) -> None:
    """A budget spent before any candidate was timed (the Lab's doctor under load): its tables
    keep their columns and its charts draw, saying nothing was measured (was KeyError 'key')."""
    import dataclasses

    d = dataclasses.replace(conv_doctor, measured=[])
    assert list(d.candidates().columns) == list(conv_doctor.candidates().columns)
    assert d.candidates().empty and d.threads().empty
    for kind in ("candidates", "threads", "pareto"):
        fig = d.plot(kind)
        assert len(fig.data) == 1 and len(fig.data[0].x) == 0, kind


def test_doctor_measures_the_level_fix(conv_doctor: ortlab.DoctorResult) -> None:
    d = conv_doctor
    (x,) = [f for f in d.findings if f.rule == "optimization_level"]
    assert x.ratio is not None and x.low is not None and x.low <= x.ratio <= x.high  # type: ignore[operator]
    keys = {m.key for m in d.measured}
    assert {"baseline", "level:all", "threads:1", "spin:off"} <= keys
    assert d.rounds == MIN_ROUNDS and d.runs >= 3
    assert "rounds=4 raised to 6: a 95 % interval needs at least 6 rounds" in d.notes
    # every key has one spelling (facts.candidate_key), read back by CandidateKey.parse
    from ortlab.diagnosis.facts import CandidateKey, Kind, candidate_key

    for key in keys:
        c = CandidateKey.parse(key)
        assert candidate_key(c.kind, c.arg, final=c.final) == key
    assert CandidateKey.parse("threads:1").is_sweep and not CandidateKey.parse("level:all").is_sweep
    final = CandidateKey.parse("variant:quant-static+final")
    assert (final.kind, final.arg, final.final, final.is_variant) == (
        Kind.VARIANT,
        "quant-static",
        True,
        True,
    )
    with pytest.raises(ValueError):
        CandidateKey.parse("thread:1")  # a misspelt kind is a bug, never a silent miss
    # every verdict has a real interval, with its true coverage in its text
    for m in d.measured:
        p = m.paired
        assert p.rounds >= MIN_ROUNDS and m.confidence >= 0.95 and p.low <= p.ratio <= p.high
        assert m.key == "baseline" or f"% CI, {p.rounds} rounds)" in p.verdict
    t = d.to_pandas()
    assert list(t.columns)[:3] == ["rule", "severity", "title"] and len(t) == len(d.findings)
    assert len(d.threads()) >= 2
    for kind in ("candidates", "threads", "pareto"):
        assert d.plot(kind).data


def test_doctor_pareto_set_is_the_non_dominated_candidates(
    conv_doctor: ortlab.DoctorResult,
) -> None:
    d = conv_doctor

    def point(m: Measured) -> tuple[float, float, int]:
        return (m.paired.ratio, 1 - (1.0 if math.isnan(m.cosine) else m.cosine), m.file_bytes)

    def dominates(p: tuple[float, ...], q: tuple[float, ...]) -> bool:
        return all(a <= b for a, b in zip(p, q, strict=True)) and p != q

    front = {m.key for m in d.pareto_set()}
    t = d.candidates()
    assert set(t.loc[t["pareto"], "key"]) == front
    assert min(d.measured, key=point).key in front  # the lexicographic best is never dominated
    for m in d.measured:
        beaten = any(dominates(point(o), point(m)) for o in d.measured if o is not m)
        assert beaten is (m.key not in front), m.key


def test_doctor_records_how_busy_the_machine_was(conv_doctor: ortlab.DoctorResult) -> None:
    from ortlab.core.machine import MIN_LOAD_WINDOW_S

    d = conv_doctor
    assert set(d.other_cpu) <= set(d.stages) and "screen" in d.other_cpu
    short = {s for s, sec in d.stages.items() if sec < MIN_LOAD_WINDOW_S}
    assert set(d.stages) - set(d.other_cpu) <= short  # only stages too short to tell lack one
    cpus = int(d.environment["cpu_count"])
    assert all(0.0 <= v <= cpus for v in d.other_cpu.values())
    assert d.environment["other processes' CPU"].endswith(f"cores of {cpus} logical CPUs")


def test_best_snippet_runs_with_plain_onnxruntime(conv_doctor: ortlab.DoctorResult) -> None:
    best = conv_doctor.best
    assert isinstance(best.config, SessionConfig)
    code = best.snippet()
    assert "import ortlab" not in code
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)


def test_doctor_result_json_round_trip(conv_doctor: ortlab.DoctorResult, tmp_path: Any) -> None:
    again = ortlab.DoctorResult.from_json(conv_doctor.to_json())
    assert again.findings == conv_doctor.findings and again.best == conv_doctor.best
    assert again.other_cpu == conv_doctor.other_cpu
    assert repr(again.measured) == repr(conv_doctor.measured)  # NaN (no cosine) == NaN here
    assert isinstance(again.profile, ortlab.ProfileResult)  # typed: the report can use it
    assert ortlab.report(
        ortlab.examples.conv_bn_relu(), again, path=tmp_path / "r.html", compute=False
    ).exists()
    assert "<DoctorResult 'conv_bn_relu'" in repr(again)
    assert "Best verified" in again._repr_html_() and "BEST:" in again.to_text()


def test_a_best_without_interval_round_trips_and_renders(
    conv_doctor: ortlab.DoctorResult, tmp_path: Any
) -> None:
    """When nothing wins the best is the baseline with NaN bounds (no made-up [1.0, 1.0]); the
    JSON keeps the NaN and every renderer of the result copes."""
    base = {m.key: m for m in conv_doctor.measured}["baseline"]
    why = "no candidate was measurably faster than the baseline"
    best = ortlab.Best(
        base.config,
        "original",
        conv_doctor.model_path,
        [],
        Paired(1.0, math.nan, math.nan, why),
        1.0,
    )
    d = dataclasses.replace(conv_doctor, best=best)
    again = ortlab.DoctorResult.from_json(d.to_json())
    assert math.isnan(again.best.paired.low) and math.isnan(again.best.paired.high)
    assert again.best.paired.verdict == why and again.best.paired.ratio == 1.0
    assert f"BEST: original · {again.best.config.label()} — {why}" in again.to_text()
    assert why in again._repr_html_() and why in again.best.snippet() and why in repr(again)
    assert ortlab.report(
        ortlab.examples.conv_bn_relu(), again, path=tmp_path / "r.html", compute=False
    ).exists()


@pytest.mark.slow
def test_doctor_catches_a_silent_cuda_fallback() -> None:
    d = ortlab.doctor(
        ortlab.examples.mlp(), providers=["cuda", "cpu"], budget_s=8, quantize=False, progress=False
    )
    assert d.findings[0].rule == "ep_fallback" and d.findings[0].severity == "error"
    assert "CUDA" in d.findings[0].title
    dynamic = any(
        isinstance(x, str) for t in ortlab.load(ortlab.examples.mlp()).inputs for x in t.shape or []
    )
    assert any(f.rule == "cuda_graph" for f in d.findings) is not dynamic


@pytest.mark.slow
def test_doctor_fixes_initializer_inputs() -> None:
    d = ortlab.doctor(models.initializers_as_inputs(), budget_s=BUDGET, rounds=6, progress=False)
    (x,) = [f for f in d.findings if f.rule == "initializer_inputs"]
    assert x.ratio is not None  # the fixed variant was timed against the original
    m = {c.key: c for c in d.measured}["variant:no-initializer-inputs"]
    assert m.cosine == pytest.approx(1.0)


@pytest.mark.slow
def test_doctor_explains_a_slower_int8_variant() -> None:
    m = ortlab.load(ortlab.examples.conv_bn_relu())
    q = ortlab.quantize(m, mode="dynamic")  # ConvInteger: ~10x slower on this model
    d = ortlab.doctor(m, variants=[q], budget_s=BUDGET, rounds=6, quantize=False, progress=False)
    (x,) = [f for f in d.findings if f.rule == "slow_variant"]
    assert "ConvInteger" in x.evidence and "static quantization" in x.fix
    assert x.ratio is not None and x.ratio > 1


@pytest.mark.slow
def test_doctor_on_a_transformer_runs_the_optimizer() -> None:
    d = ortlab.doctor(ortlab.examples.bert_tiny(), budget_s=BUDGET, rounds=6, progress=False)
    (x,) = [f for f in d.findings if f.rule == "unfused_transformer"]
    assert "2 Attention" in x.evidence and x.ratio is not None
    keys = {m.key for m in d.measured}
    assert "variant:transformers" in keys
    # the int8 candidate follows the MatMul share the doctor measured (load moves it)
    assert d.profile is not None
    share = d.profile.by_op_type().groupby("op_type")["share"].sum()
    matmul = sum(v for k, v in share.items() if "MatMul" in k or "Gemm" in k or "Attention" in k)
    assert ("variant:quant-dynamic" in keys) == (matmul >= 0.3), (matmul, sorted(keys))
    assert ("variant:quant-int4" in keys) == (matmul >= 0.3), "bert_tiny has MatMul weights"


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Any:
    """ORT in this process (so its quantizer can be patched), with an empty cache (no variant
    quantized by another test is reused)."""
    from ortlab.engine import worker

    before = worker._isolation
    monkeypatch.setenv("ORTLAB_CACHE_DIR", str(tmp_path / "cache"))
    ortlab.set_isolation("inprocess")
    yield
    ortlab.set_isolation(before)


@pytest.mark.slow
@pytest.mark.usefixtures("in_process")
def test_doctor_goes_on_when_the_quantizer_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """ORT's quantizer raising AssertionError() with an empty message (as on ResNet-50 with
    initializer inputs) is a finding; every other candidate is still measured."""
    import onnxruntime.quantization

    def scale_issue(*_: Any, **__: Any) -> None:
        raise AssertionError

    monkeypatch.setattr(onnxruntime.quantization, "quantize_static", scale_issue)
    d = ortlab.doctor(
        ortlab.examples.conv_bn_relu(),
        budget_s=BUDGET,
        rounds=6,
        transformers=False,
        progress=False,
    )
    (x,) = [f for f in d.findings if f.rule == "candidate_failed"]
    assert x.title.startswith("static QDQ minmax per-channel fails: ")
    assert "AssertionError" in x.evidence and x.severity == "warning"
    keys = {m.key for m in d.measured}
    assert "variant:quant-static" not in keys and {"baseline", "threads:1", "spin:off"} <= keys


@pytest.mark.slow
def test_doctor_goes_on_when_orts_session_for_a_variant_fails(tmp_path: Any) -> None:
    """A variant onnx loads but ORT cannot build a session for (an op ORT does not know):
    the worker leaves it out of the timing and the doctor reports it."""
    proto = ortlab.load(ortlab.examples.conv_bn_relu()).proto
    proto.graph.node[-1].op_type = "NoSuchOp"
    broken = tmp_path / "broken.onnx"
    onnx.save(proto, broken)
    d = ortlab.doctor(
        ortlab.examples.conv_bn_relu(),
        variants=[broken],
        budget_s=BUDGET,
        rounds=6,
        quantize=False,
        transformers=False,
        progress=False,
    )
    (x,) = [f for f in d.findings if f.rule == "candidate_failed"]
    assert x.title.startswith("candidate variant:broken (broken · ") and "NoSuchOp" in x.evidence
    assert "session" in x.fix
    keys = {m.key for m in d.measured}
    assert "variant:broken" not in keys and {"baseline", "threads:1", "spin:off"} <= keys


def test_doctor_quiet_parts_on_a_healthy_cnn(conv_doctor: ortlab.DoctorResult) -> None:
    rules_seen = {f.rule for f in conv_doctor.findings}
    assert not rules_seen & {
        "ep_fallback",
        "ep_islands",
        "unfused_transformer",
        "initializer_inputs",
        "trt_dynamic_shapes",
        "cuda_graph",
    }


# ---------------------------------------------------------------------- report and CLI

HOSTILE = "<img src=x onerror=alert(1)>"


def test_report_is_self_contained_and_escapes_model_strings(
    tmp_path: Any, conv_doctor: ortlab.DoctorResult
) -> None:
    m = ortlab.load(models.add([1, 4]))
    proto = m.proto
    proto.graph.node[0].name = HOSTILE
    proto.graph.node[0].op_type = "Add"
    hostile = ortlab.load(proto, name="hostile</script><script>alert(2)</script>")
    out = ortlab.report(hostile, path=tmp_path / "r.html")
    text = out.read_text()
    assert HOSTILE not in text and "<script>alert(2)" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text or "\\u003cimg" in text
    assert "Content-Security-Policy" in text
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", text)  # nothing fetched
    # figures are JSON blocks one loader draws: op type, sunburst, timeline (+ optimization)
    assert text.count('class="ortlab-figure"') >= 3
    for section in ("Graph optimization levels", "Profile: where the time goes", "Environment"):
        assert section in text
    full = ortlab.report(
        ortlab.examples.conv_bn_relu(), conv_doctor, path=tmp_path / "d.html", compute=False
    )
    assert "Doctor: findings and verified fixes" in full.read_text()


@pytest.mark.slow
def test_cli_doctor_and_report(tmp_path: Any) -> None:
    from ortlab.cli import main

    path = tmp_path / "m.onnx"
    import onnx

    onnx.save(ortlab.examples.mlp(), path)
    out = tmp_path / "out.json"
    assert main(["doctor", str(path), "--budget", "6", "--json", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["ortlab"] == "DoctorResult" and "findings" in data["data"]
    html = tmp_path / "r.html"
    assert main(["report", str(path), "-o", str(html), "--budget", "6"]) == 0
    assert "ortlab report" in html.read_text()


@pytest.mark.slow
def test_a_requested_npu_that_does_not_run_here_gets_its_predicted_partition() -> None:
    """QNN cannot run here, but its compiler can: the doctor says how many nodes it would take
    and why the others fall back, with the same numbers ortlab.whatif gives, as a prediction."""
    pytest.importorskip("onnxruntime_qnn")
    m = ortlab.examples.load("bert_tiny")
    d = ortlab.doctor(
        m,
        providers=["qnn", "cpu"],
        budget_s=600,
        rounds=6,
        quantize=False,
        transformers=False,
        progress=False,
    )
    (x,) = [f for f in d.findings if f.rule == "npu_partition"]
    w = ortlab.whatif(m, targets=["qnn"], progress=False).summary().iloc[0]
    assert x.title == f"QNN would take {w.on_target} of {w.on_target + w.on_cpu} nodes (predicted)"
    assert "dynamic shape" in x.evidence and "fix the input shapes" in x.fix
    assert x.ratio is None and "prediction" in x.gain


def _footprint(**changes: tuple[list[float], list[float]]) -> Any:
    """A FootprintResult from given per-process measurements (MB): setting -> (held, peak)."""
    from ortlab.analysis.memory import FootprintResult, FootprintRow, _against

    mb = 1e6
    rows = [
        FootprintRow(s, SessionConfig(), [h * mb for h in held], [p * mb for p in peak], [5.0] * 4)
        for s, (held, peak) in changes.items()
    ]
    rows = [rows[0], *(_against(rows[0], r) for r in rows[1:])]
    return FootprintResult(model="m", weights_bytes=10_000_000, rows=rows, repeats=4, runs=2)


def test_memory_finding_needs_a_saving_beyond_the_spread_and_worth_having() -> None:
    ref = ([100, 101, 100, 102], [120, 121, 120, 122])
    noise = ([99, 102, 100, 101], [119, 122, 121, 120])  # overlaps the reference
    tiny = ([99, 99, 99, 99], [119, 119, 119, 119])  # measurable, but < 5 % of the peak
    f = _facts(
        footprint=_footprint(**{"as configured": ref, "arena off": noise, "prepacking off": tiny})
    )
    [x] = _rules(f, "memory")
    assert x.severity == "info" and "no setting" in x.title
    big = ([60, 61, 60, 60], [80, 81, 80, 80])
    slower = _m("memory:arena off", 1.2, 1.1, 1.3)
    f = _facts(
        footprint=_footprint(**{"as configured": ref, "arena off": big}),
        measured={"memory:arena off": slower},
    )
    [x] = _rules(f, "memory")
    assert "arena off" in x.title and "38.1 MB" in x.title and "(33%)" in x.title
    assert x.severity == "info", "a saving that costs time is a trade-off, not a warning"
    assert "costs time" in x.gain and x.ratio == slower.paired.ratio
    assert "the time it costs" in x.fix


def test_quantization_candidates_follow_where_the_time_goes() -> None:
    from ortlab.diagnosis.candidates import wanted_quantization as _wanted_quantization

    conv = _wanted_quantization({"Conv": 0.7, "Relu": 0.1}, {"Conv": 20})
    assert [k for k, _ in conv] == ["static"]
    matmul = _wanted_quantization({"MatMul": 0.5}, {"MatMul": 12, "Add": 12})
    assert [k for k, _ in matmul] == ["dynamic", "int4"]
    assert matmul[1][1].mode == "int4"
    gemm = _wanted_quantization({"Gemm": 0.8}, {"Gemm": 3})  # int4 quantizes MatMul weights
    assert [k for k, _ in gemm] == ["dynamic"]


def test_a_wide_interval_is_undecided_never_no_faster() -> None:
    """A variant 1.45x faster by its point estimate with the interval 0.688 [0.349, 1.303]
    was titled "no faster". Only an interval that excludes a gain says that."""
    wide = _m("variant:quant-dynamic", 0.688, 0.349, 1.303, cosine=0.9999, variant="q")
    none = _m("variant:quant-dynamic", 1.01, 0.99, 1.04, cosine=0.9999, variant="q")
    fast = _m("variant:quant-dynamic", 0.5, 0.45, 0.55, cosine=0.9999, variant="q")
    titles = []
    for m in (wide, none, fast):
        f = _facts(measured={"baseline": _m("baseline", 1.0, 1.0, 1.0), "variant:quant-dynamic": m})
        titles += [x.title for x in _rules(f, "quantization")]
    assert titles[0] == "q: undecided (time ratio 0.69 [0.35, 1.30]), accuracy cost shown"
    assert titles[1] == "q: no faster, accuracy cost shown"
    assert titles[2] == "q: faster, accuracy cost shown"


def test_undecided_means_the_interval_allows_a_gain_it_does_not_show() -> None:
    from ortlab.core.stats import Verdict

    assert Verdict(0.688, 0.349, 1.303, 0.97, 8, NOISE_BAND).undecided
    assert not Verdict(0.5, 0.45, 0.55, 0.97, 8, NOISE_BAND).undecided  # shown faster
    assert not Verdict(1.01, 0.99, 1.04, 0.97, 8, NOISE_BAND).undecided  # excludes a gain
    assert not Verdict(0.7, math.nan, math.nan, math.nan, 3, NOISE_BAND).undecided


def test_more_rounds_for_the_undecided_stay_paired_with_the_baseline(
    mlp: ortlab.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The combination stage extends only the undecided candidates: their rounds must be paired
    with the baseline's rounds of the same calls (a decided candidate keeps its own). On
    MiniLM the doctor once compared 32 baseline rounds with 8 of a candidate and stopped. The
    timing is scripted here; what is checked is the bookkeeping."""
    from ortlab.diagnosis.verify import settle

    def scripted(run, budget, items, rounds, runs, *, desc):  # type: ignore[no-untyped-def]  # noqa: ARG001
        # baseline 10 ms; "wide" alternates 5 and 12 ms (undecided), "clear" 5 ms
        pattern = {
            "baseline": [10.0] * rounds,
            "clear": [5.0] * rounds,
            "wide": [5.0 if r % 2 else 12.0 for r in range(rounds)],
        }
        med = np.column_stack([pattern[it.key] for it in items])
        return measure.Timed(med, list(items), {it.key: (1,) * rounds for it in items})

    monkeypatch.setattr(measure, "time_items", scripted)  # the stage's timing, scripted
    run, budget = _search(budget_s=60.0, m=mlp)
    spend = budget.for_stage()
    finals = [Candidate(k, mlp, SessionConfig(), []) for k in ("baseline", "clear", "wide")]
    med = measure.time_items(run, spend, finals, 8, 3, desc="").medians_ms
    cols = {it.key: (list(med[:, 0]), list(med[:, k])) for k, it in enumerate(finals)}
    extra = settle(run, spend, Facts(_observed()), finals, cols, runs=3)
    assert len(cols["clear"][0]) == len(cols["clear"][1]) == 8  # decided: not extended
    assert len(cols["wide"][0]) == len(cols["wide"][1]) > 8  # extended, still paired
    assert set(extra) == {"baseline", "wide"} and len(extra["wide"]) == len(cols["wide"][1]) - 8
    assert any("more rounds for wide" in n for n in spend.said.notes)


def test_the_quantization_finding_reads_the_final_measurement_of_its_variant() -> None:
    """The screen left a variant undecided; the final stage re-measured it faster. The finding
    said "undecided" while the best said 1.38x faster: it now says what the final stage found."""
    screen = _m("variant:quant-static", 0.79, 0.50, 1.15, cosine=0.9999, variant="q")
    final = dataclasses.replace(
        _m("variant:quant-static+final", 0.725, 0.588, 0.874, cosine=0.9999, variant="q"),
        stage="final",
    )
    f = _facts(
        measured={
            "baseline": _m("baseline", 1.0, 1.0, 1.0),
            "variant:quant-static": screen,
            "variant:quant-static+final": final,
        }
    )
    [finding] = _rules(f, "quantization")
    assert finding.title == "q: faster, accuracy cost shown"


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["candidates", "screen"])
def test_a_stage_that_fails_before_the_baseline_is_timed_still_gives_a_result(
    mlp: ortlab.Model, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    """A stage's ortlab error stops the doctor with what it had (it once ended in KeyError
    'baseline' when the failure came before the screen timed the baseline)."""
    from ortlab.core.errors import OrtlabError

    def fail(*_args: object, **_kwargs: object) -> None:
        raise OrtlabError("planted failure")

    monkeypatch.setattr(search, stage, fail)
    d = ortlab.doctor(mlp, budget_s=10, progress=False)
    assert any("planted failure" in n and "stopped at its" in n for n in d.notes)
    assert d.best.variant == "original" and "before it timed the baseline" in d.best.paired.verdict
    assert "planted failure" in d.to_text()


def test_no_call_starts_once_the_budget_and_its_slack_are_spent() -> None:
    """picodet's doctor ended at 1.48x its budget: after a call the budget cut short, the
    next one still got 2 s and a worker restart. Now a spent budget starts nothing: the
    guarded step becomes a note (not a failure of the tool), and a cut-short call is a note
    saying to raise budget_s."""
    import time as clock

    from ortlab.core.errors import WorkerTimeoutError
    from ortlab.diagnosis.budget import Budget, BudgetSpentError

    b = Budget(10.0, clock.perf_counter() - 5.0).for_stage()  # 5 s left: calls run to 12 s
    assert 6.5 < b.call_timeout() <= 7.0
    assert b.build_timeout() <= 2.0  # the building half ended at 5 s: 2 s at most
    b = Budget(10.0, clock.perf_counter() - 11.5).for_stage()  # 0.5 s before the deadline
    with pytest.raises(BudgetSpentError):  # nothing starts
        b.call_timeout()
    assert b.guarded("step", "build", b.call_timeout) is None
    assert b.said.failures == () and b.said.skipped[-1].startswith("step (not started: the")

    def cut() -> None:
        raise WorkerTimeoutError("did not finish")

    assert b.guarded("static QDQ", "build", cut, "ortlab.quantize(model)") is None
    assert b.said.failures == () and b.said.skipped[-1].startswith("static QDQ (did not finish")
    assert "run it alone: ortlab.quantize(model)" in b.said.skipped[-1]
    note = b.budget.left_out(b.said)  # both, once, with the one piece of advice
    assert note.count("raise budget_s") == 1
    assert note.endswith("left out by the 10 s budget: raise budget_s to measure them")


@pytest.mark.parametrize("own_timeout", [None, 5.0])
def test_a_stage_the_budget_stopped_is_a_note_and_the_callers_timeout_a_failure(
    own_timeout: float | None,
) -> None:
    """A worker call that outlives its limit inside a stage (Piper's combine stage on a busy CI
    machine: 12.9 s, what the budget left it) was said as "the combine stage fails … the
    model may hang ORT". Where the limit was the budget's it is a note saying to raise
    budget_s and the doctor keeps what it measured; where it was the caller's own
    ``timeout=``, a failure as before."""
    from ortlab.core.errors import WorkerTimeoutError
    from ortlab.diagnosis.stages import run_plan

    run, budget = _search(budget_s=60.0)
    budget = dataclasses.replace(budget, timeout=own_timeout)
    ran: list[str] = []

    def slow(*_: Any) -> Any:
        ran.append("combine")
        limit = own_timeout if own_timeout is not None else 12.9
        raise WorkerTimeoutError(f"did not finish within {limit} s", timeout_s=limit)

    def after(*_: Any) -> Any:
        ran.append("explain")
        raise AssertionError("no stage runs after one that ended the doctor")

    done: list[str] = []
    start = (run, budget, Facts(_observed()))
    facts = run_plan([("combine", slow), ("explain", after)], start, done.append, False)
    assert ran == ["combine"] and done == ["combine"]
    failures = [f.what for f in facts.failures]
    if own_timeout is None:
        assert failures == [] and not any("stopped at" in n for n in facts.said.notes)
        assert facts.said.skipped[-1].startswith("the combine stage and those after it")
        assert budget.left_out(facts.said).endswith("raise budget_s to measure them")
    else:
        assert failures == ["the combine stage"]
        assert facts.said.skipped == ()


@pytest.mark.parametrize("providers", [["qnn", "cpu"], ["cpu"]])
def test_the_baseline_is_profiled_once(
    monkeypatch: pytest.MonkeyPatch, providers: list[str]
) -> None:
    """The doctor's first stage profiles the baseline in one session: with an EP that compiles
    (no roofline can count its kernels) the placement join's own profile is the profile; with
    the CPU alone the roofline's profile is, and no placement runs."""
    from ortlab.diagnosis import search as search_module

    calls: list[str] = []
    real_placement, real_roof = search_module.placement_run, search_module.profile_with_roofline

    def counted_placement(*a: Any, **k: Any) -> Any:
        calls.append("placement")
        return real_placement(*a, **k)

    def counted_roof(*a: Any, **k: Any) -> Any:
        calls.append("profile")
        return real_roof(*a, **k)

    monkeypatch.setattr(search_module, "placement_run", counted_placement)
    monkeypatch.setattr(search_module, "profile_with_roofline", counted_roof)
    m = ortlab.load(ortlab.examples.mlp())
    run, budget = _search(m=m)
    cfg = SessionConfig(providers=providers, fallback="allow")
    run = run.with_(config=cfg, inputs=Feeds(dict(m.example_inputs())))
    out = search.observe(run, budget.for_stage(), min_cosine=0.999)  # the first stage alone
    seen, prof = out.facts.seen, out.facts.profile
    assert len(calls) == 1, calls
    assert prof is not None and prof.report is not None and seen.profiled_ms > 0
    if "qnn" in providers:
        assert calls == ["placement"] and seen.roofline is None


def test_a_quantization_finding_that_quotes_its_fix_says_so_in_its_title() -> None:
    """An inaccurate int8 variant, faster, and its fix (worst nodes at 16 bits) within noise:
    the finding quotes the fix's measurement, so its title names the fix and what held for it
    (the report read "q: faster" beside the fix's "no measurable difference")."""
    from ortlab.diagnosis.counted import counted
    from ortlab.diagnosis.facts import FixTried, Kind, candidate_key

    q = _m("variant:quant-static", 0.60, 0.55, 0.66, cosine=0.95, variant="q")
    fix_key = candidate_key(Kind.VARIANT, "quant-static-fix16")
    fix = _m(fix_key, 0.90, 0.70, 1.05, cosine=0.9995, variant="q fixed")
    f = _facts(
        measured={"baseline": _m("baseline", 1.0, 1.0, 1.0), q.key: q, fix_key: fix},
        quant_fixes={q.key: FixTried(["conv1"], {fix_key: "their outputs quantized to 16 bits"})},
    )
    [finding] = _rules(f, "quantization")
    held = counted(f.measured, fix_key)
    assert held is not None and finding.ratio == held.row.paired.ratio
    assert finding.title == f"q: faster, accuracy cost shown; the fix (q fixed): {held.word()}"


@pytest.mark.slow
def test_the_progress_names_each_stage_as_it_starts(mlp: ortlab.Model) -> None:
    """Issue 48 item 6: a callback with a ``stage`` method (the Lab's bar) hears each stage's
    name before the counts its calls report, in the order the doctor ran them (the stage
    timings name the same stages), and ``(k, n)`` of the stages."""
    heard: list[object] = []

    def progress(done: int, total: int) -> None:
        heard.append((done, total))

    progress.stage = heard.append  # type: ignore[attr-defined]
    d = ortlab.doctor(mlp, budget_s=10, progress=progress)
    names = [x for x in heard if isinstance(x, str)]
    order = ["memory", "build variants", "screen", "CPU cost"]  # a budget spent early stops
    assert len(names) >= 3 and names[:4] == order[: len(names[:4])], names  # it (busy CI)
    timed = [k for k in d.stages if k in names]
    assert timed == names[: len(timed)] and len(timed) >= 3
    k = heard.index("screen")  # then the stages done of all: screen is the third
    assert heard[k + 1] == (names.index("screen"), heard[k + 1][1]) and heard[k + 1][1] >= 6
