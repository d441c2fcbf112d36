"""The CPU people pay for (issue 47 item 4): what each setting costs in CPU per run and what
an idle session's pool burns, measured by the CPU task and checked against the operating
system read independently (``resource.getrusage`` in this process, /proc for the worker); the
doctor's CPU stage, its idle-spin finding (facts built by hand, then a real run) and
``objective="cpu"``. Nothing asserts how fast the machine is: the checks are accounting
(the parts never exceed the whole) and what a sleeping pool must show (no core busy)."""

from __future__ import annotations

import dataclasses
import math
import resource
from pathlib import Path
from typing import Any

import pytest

import ortlab
from ortlab.core.config import SessionConfig
from ortlab.core.errors import OptionError
from ortlab.core.machine import IDLE_WINDOW_S
from ortlab.core.runtime import TIMED_SPIN_US, has_timed_spin
from ortlab.core.stats import Paired, paired_ratio
from ortlab.diagnosis import rules_resources
from ortlab.diagnosis.cpu import best_for_cpu, cpu_verdict
from ortlab.diagnosis.facts import CpuCost, CpuCosts
from ortlab.engine import tasks_cpu
from ortlab.engine.calls import Via, run
from ortlab.engine.worker import InProcessWorker
from tests.models import facts_of, measured

TICK_S = 0.02
"""/proc and getrusage count in clock ticks (10 ms): a sum may exceed the whole by a tick."""


def _self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def test_cpu_costs_agree_with_getrusage_in_process() -> None:
    """In this process (the in-process worker), getrusage's CPU over the whole call holds every
    block's CPU and every idle window's; a pool with spinning off keeps no core busy once idle
    and runs on the one thread it has."""
    m = ortlab.examples.load("mlp")
    feeds = m.example_inputs(seed=1)
    items = [
        (str(m.path), m.name, SessionConfig(allow_spinning=False, intra_op_threads=1)),
        (str(m.path), m.name, SessionConfig(intra_op_threads=2)),
    ]
    before = _self_cpu_s()
    out = run(
        tasks_cpu.cpu_costs,
        Via(worker=InProcessWorker()),
        items=items,
        feeds=feeds,
        rounds=4,
        runs=300,
    )
    whole = _self_cpu_s() - before
    blocks = sum(sum(row) for row in out.cpu_ns) / 1e9
    idle = sum(sum(row) for row in out.idle_cores) * IDLE_WINDOW_S
    assert 0 < blocks + idle <= whole + TICK_S
    quiet = [row[0] for row in out.idle_cores]
    assert max(quiet) < 0.05  # no spinning, one thread: asleep once idle
    for row_cpu, row_wall in zip(out.cpu_ns, out.wall_ns, strict=True):
        assert row_cpu[0] <= row_wall[0] * 1.2 + 2e6  # one thread: at most one core (+ a tick)
    assert out.failed == {} and out.interleaved


@pytest.mark.slow
def test_measure_cpu_agrees_with_the_workers_proc() -> None:
    """Through the real worker: its CPU read from /proc by this process over the call holds
    what the task says its blocks and idle windows used; ms per run is CPU over the runs."""
    import psutil

    from ortlab.engine.calls import edge, measure_cpu
    from ortlab.engine.worker import get_worker

    m = ortlab.examples.load("mlp")
    base = edge(m, None, None, progress=False)
    items = [(m, SessionConfig()), (m, SessionConfig(allow_spinning=False))]
    measure_cpu(items, base, rounds=1, runs=10, desc="", context="")  # sessions built
    proc = psutil.Process(get_worker().pid)
    before = sum(proc.cpu_times()[:2])
    out = measure_cpu(items, base, rounds=6, runs=400, desc="", context="")
    whole = sum(proc.cpu_times()[:2]) - before
    blocks = float(out.cpu_ms.sum()) * out.runs / 1e3
    idle = float(out.idle_cores.sum()) * IDLE_WINDOW_S
    assert 0 < blocks + idle <= whole + TICK_S
    assert out.cpu_ms.shape == (6, 2) and out.runs == 400
    assert float(out.idle_cores[:, 1].max()) < 0.05  # spinning off: asleep once idle


def _cost(key: str, cpu_ms: float, idle: float, paired: Paired | None = None) -> CpuCost:
    return CpuCost(
        key=key,
        label=f"cpu · all · {key}",
        config=SessionConfig(allow_spinning=False) if key == "spin:off" else SessionConfig(),
        cpu_ms=cpu_ms,
        wall_ms=0.5,
        idle_cores=idle,
        paired=paired or Paired(1.0, 1.0, 1.0, "baseline"),
    )


def _spin_facts(base_idle: float, spin_idle: float = 0.0) -> Any:
    v = paired_ratio([1.0] * 6, [0.8, 0.82, 0.79, 0.81, 0.8, 0.83])
    cpu = CpuCosts(
        rows={
            "baseline": _cost("baseline", 1.1, base_idle),
            "spin:off": _cost("spin:off", 0.9, spin_idle, Paired.of(v, cpu_verdict(v))),
        },
        rounds=6,
        runs=100,
    )
    return facts_of(
        model_name="m",
        requested=SessionConfig(),
        op_counts={"MatMul": 3},
        baseline_ms=0.57,
        cores=2,
        report=None,
        measured={
            "baseline": measured("baseline", 1.0, 1.0, 1.0, p50=0.57),
            "spin:off": measured("spin:off", 1.09, 1.05, 1.12, p50=0.62),
        },
        cpu=cpu,
    )


def test_idle_spin_finding_says_both_measurements() -> None:
    """A pool that keeps 1.8 cores busy idle is a finding quoting the CPU stage's numbers and
    the screen's latency; 0.02 idle cores is not."""
    found = rules_resources.idle_spin(_spin_facts(1.8))
    assert len(found) == 1
    f = found[0]
    assert "1.80 cores busy" in f.evidence and "→ 0.00 with spinning off" in f.evidence
    assert "p50 570 µs → 620 µs" in f.evidence
    assert "1.80 cores freed while idle" in f.gain
    assert "allow_spinning" in f.code
    assert f.severity == "info"  # spinning off is slower here: a trade, said as one
    assert "costs latency" in f.fix
    assert rules_resources.idle_spin(_spin_facts(0.02)) == []


def test_idle_spin_offers_spinning_bounded_in_time_where_it_keeps_the_latency() -> None:
    """Three ways measured: the default keeps 1.8 cores busy idle, spinning bounded to 1 ms
    keeps the latency (no measurable difference) at a fraction of the CPU, spinning off costs
    latency: the finding quotes both and its fix is the bounded spin, said as onnxruntime
    spells it."""
    f0 = _spin_facts(1.8)
    v = paired_ratio([1.0] * 6, [0.84, 0.86, 0.85, 0.83, 0.85, 0.86])
    key = f"spin:{TIMED_SPIN_US}us"
    bounded = CpuCost(
        key=key,
        label=f"cpu · all · spin ≤{TIMED_SPIN_US} µs",
        config=SessionConfig(spin_duration_us=TIMED_SPIN_US),
        cpu_ms=0.93,
        wall_ms=0.5,
        idle_cores=0.03,
        paired=Paired.of(v, cpu_verdict(v)),
    )
    f = dataclasses.replace(
        f0,
        cpu=dataclasses.replace(f0.cpu, rows={**f0.cpu.rows, key: bounded}),
        measured={**f0.measured, key: measured(key, 1.0, 0.97, 1.03, p50=0.571)},
    )
    (found,) = rules_resources.idle_spin(f)
    assert f"→ 0.03 with spinning at most {TIMED_SPIN_US} µs" in found.evidence
    assert "→ 0.00 with spinning off" in found.evidence
    assert found.gain.startswith(f"spinning at most {TIMED_SPIN_US} µs: 1.77 cores freed")
    assert f"spin_duration_us={TIMED_SPIN_US}" in found.code
    assert "'session.intra_op.spin_duration_us'" in found.code
    assert found.severity == "warning"  # no latency lost: a plain gain
    assert (
        SessionConfig(spin_duration_us=TIMED_SPIN_US)
        .snippet()
        .count(f"add_session_config_entry('session.intra_op.spin_duration_us', '{TIMED_SPIN_US}')")
        == 1
    )


def test_cpu_verdict_and_best_for_cpu() -> None:
    """The CPU sentence is a verdict with its interval; the CPU best is the accurate candidate
    that saves the most beyond noise, never one within noise."""
    less = paired_ratio([1.0] * 6, [0.6, 0.62, 0.61, 0.63, 0.59, 0.6])
    same = paired_ratio([1.0] * 6, [0.98, 1.02, 1.0, 0.99, 1.01, 1.0])
    assert cpu_verdict(less).startswith("1.6")
    assert "less CPU per run" in cpu_verdict(less) and "CI, 6 rounds" in cpu_verdict(less)
    assert cpu_verdict(same).startswith("no measurable difference")
    assert "not enough rounds" in cpu_verdict(paired_ratio([1.0] * 3, [0.5] * 3))
    costs = CpuCosts(
        rows={
            "baseline": _cost("baseline", 1.0, 0.2),
            "threads:1": _cost("threads:1", 0.6, 0.0, Paired.of(less, cpu_verdict(less))),
            "spin:off": _cost("spin:off", 1.0, 0.0, Paired.of(same, cpu_verdict(same))),
        }
    )
    rows = {k: measured(k, 1.0, 0.9, 1.1) for k in costs.rows}
    won = best_for_cpu(costs, rows, lambda _m: True)
    assert won is not None and won.key == "threads:1"
    assert best_for_cpu(costs, rows, lambda m: m.key != "threads:1") is None


def test_unknown_objective_is_refused_before_any_work() -> None:
    with pytest.raises(OptionError, match="'latency', 'cpu'"):
        ortlab.doctor(ortlab.examples.load("mlp"), objective="power", progress=False)


@pytest.mark.slow
def test_doctor_measures_cpu_and_chooses_for_it() -> None:
    """A real doctor on the MLP with ``objective="cpu"``: the baseline and every thread and
    spinning candidate have a CPU row (one measurement: the table, the text and the finding
    quote the same figures), spinning off sleeps once idle, the best is chosen for CPU (its
    own row saves CPU beyond noise, or it is the baseline with why), and the result
    round-trips."""
    d = ortlab.doctor(
        ortlab.examples.load("mlp"),
        budget_s=120,
        memory=False,
        quantize=False,
        transformers=False,
        objective="cpu",
        progress=False,
    )
    assert d.cpu is not None and d.cpu.baseline is not None
    t = d.cpu_costs()
    keys = set(t["key"])
    assert {"baseline", "spin:off", "threads:1"} <= keys
    assert t.set_index("key").loc["spin:off", "idle_cores"] < 0.05
    if has_timed_spin():  # the middle way, beside on and off: its threads sleep after 1 ms
        bounded = f"spin:{TIMED_SPIN_US}us"
        assert bounded in keys
        assert t.set_index("key").loc[bounded, "idle_cores"] < 0.05
        assert d.cpu.rows[bounded].config.spin_duration_us == TIMED_SPIN_US
    assert all(t["cpu_ms_per_run"] > 0) and not t["cpu_ms_per_run"].isna().any()
    assert d.best.objective == "cpu"
    if d.best.key:
        row = d.cpu.rows[d.best.key]
        assert row.saves and d.best.paired.ratio == row.paired.ratio
        from ortlab.views.doctor import best_verdict

        assert "less CPU per run" in d.best.paired.verdict and d.best.latency is not None
        # the latency beside the CPU verdict (a busy machine's caveat may follow it)
        assert f"{d.best.paired.verdict}; latency: {d.best.latency.verdict}" in best_verdict(d.best)
    else:
        assert "CPU" in d.best.paired.verdict
    text = d.to_text()
    assert "CPU cost (6 rounds" in text and "BEST (for CPU per run)" in text
    base = d.cpu.baseline
    assert base is not None
    spin = [f for f in d.findings if f.rule == "idle_spin"]
    assert bool(spin) == (base.idle_cores >= rules_resources.IDLE_SPIN_CORES)
    for f in spin:
        assert f"{base.idle_cores:.2f} cores busy" in f.evidence
        assert f"{base.cpu_ms:.3f} →" in f.evidence
    back = ortlab.DoctorResult.from_json(d.to_json())
    assert back.cpu == d.cpu and back.objective == "cpu"
    assert math.isclose(back.cpu_costs()["cpu_ms_per_run"].sum(), t["cpu_ms_per_run"].sum())


def test_cpu_costs_one_at_a_time_when_sessions_do_not_fit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Sessions that would not fit in memory together are measured one after another (said
    by ``interleaved``), each item's figures complete, a broken item recorded, not raised."""
    m = ortlab.examples.load("mlp")
    feeds = m.example_inputs(seed=1)
    items = [
        (str(m.path), m.name, SessionConfig(allow_spinning=False)),
        (str(m.path), m.name, SessionConfig(intra_op_threads=1)),
        (str(tmp_path / "gone.onnx"), "gone", SessionConfig()),
    ]
    worker = InProcessWorker()
    kw: dict[str, Any] = {"items": items[:2], "feeds": feeds, "rounds": 2, "runs": 20}
    run(tasks_cpu.cpu_costs, Via(worker=worker), **kw)  # their sizes known
    monkeypatch.setenv("ORTLAB_SESSION_BUDGET_MB", "0.001")
    out = run(tasks_cpu.cpu_costs, Via(worker=worker), **{**kw, "items": items})
    assert not out.interleaved
    assert 2 in out.failed and list(out.failed) == [2]
    for row in out.cpu_ns:
        assert all(v > 0 for v in row[:2]) and math.isnan(row[2])


def _full_window() -> float:
    """The idle window as it was measured before it could end early: sleep it all, CPU over
    wall time."""
    import time

    c0, t0 = time.process_time_ns(), time.perf_counter_ns()
    time.sleep(IDLE_WINDOW_S)
    return (time.process_time_ns() - c0) / (time.perf_counter_ns() - t0)


def test_an_idle_window_that_ends_early_reads_what_the_whole_window_reads() -> None:
    """``idle_cores`` stops waiting once the pool has parked; what it reports is the whole
    window's figure. Against a plain onnxruntime session in this process (a pool that spins,
    one that does not), each measured after identical runs, the early and the whole window in
    turn: their medians agree within the polls' own cost and a tick, and a pool that does not
    spin reads asleep in both."""
    import statistics

    import onnxruntime as ort

    from ortlab.engine.tasks_timing import idle_cores

    m = ortlab.examples.load("conv_bn_relu")
    feeds = m.example_inputs(seed=1)
    for spin in ("1", "0"):
        so = ort.SessionOptions()
        so.intra_op_num_threads = 2
        so.add_session_config_entry("session.intra_op.allow_spinning", spin)
        sess = ort.InferenceSession(str(m.path), so, providers=["CPUExecutionProvider"])
        early, whole = [], []
        for k in range(16):
            for _ in range(20):
                sess.run(None, dict(feeds))
            (early if k % 2 == 0 else whole).append(idle_cores() if k % 2 == 0 else _full_window())
        a, b = statistics.median(early), statistics.median(whole)
        slack = TICK_S / IDLE_WINDOW_S + 0.1 * max(a, b)
        assert abs(a - b) <= slack, (spin, early, whole)
        if spin == "0":
            assert max(a, b) < 0.05, (early, whole)
