from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

import ortlab
from ortlab.core.run import Run
from ortlab.core.stats import latency_stats, paired_ratio
from ortlab.core.units import fmt_ms
from tests import models


def test_benchmark_counts_and_stats(mlp: ortlab.Model, in_tmp_cwd: Path) -> None:
    seen: list[tuple[int, int]] = []
    b = ortlab.benchmark(mlp, runs=40, warmup=5, progress=lambda d, t: seen.append((d, t)))
    assert b.stats.count == 40 == len(b.latencies_ns)
    assert b.warmup == 5
    ms = np.asarray(b.latencies_ns) / 1e6
    assert b.stats.p50_ms == pytest.approx(np.percentile(ms, 50))
    assert b.stats.min_ms <= b.stats.p50_ms <= b.stats.p90_ms <= b.stats.p99_ms <= b.stats.max_ms
    assert seen[-1] == (45, 45)
    df = b.to_pandas()
    assert df.columns.tolist() == ["run", "latency_ms"] and len(df) == 40
    assert b.report.active == ["CPUExecutionProvider"]
    assert "batch=1" in b.feeds
    assert b.environment["onnxruntime"]
    assert list(in_tmp_cwd.iterdir()) == []


def test_benchmark_json_round_trip(mlp: ortlab.Model) -> None:
    b = ortlab.benchmark(mlp, ortlab.SessionConfig(level="basic"), runs=5, progress=False)
    again = ortlab.BenchmarkResult.from_json(b.to_json())
    assert again == b
    assert again.config.level == "basic"
    assert "p50" in repr(again) and "<table" in again._repr_html_()


def test_duration_stops_early(mlp: ortlab.Model) -> None:
    """``duration_s`` ends the timed runs at the first run that ends past it: every run before
    the last ended inside the duration, and the call (this clock, not ortlab's) lasted it."""
    t0 = time.perf_counter()
    b = ortlab.benchmark(mlp, runs=10**7, warmup=1, duration_s=0.3, progress=False)
    wall_s = time.perf_counter() - t0
    assert 1 <= b.stats.count == len(b.latencies_ns) < 10**7
    assert sum(b.latencies_ns[:-1]) / 1e9 < 0.3 <= wall_s


def test_io_binding_and_threads(bert_tiny: ortlab.Model) -> None:
    cfg = ortlab.SessionConfig(intra_op_threads=1, allow_spinning=False, io_binding=True)
    b = ortlab.benchmark(bert_tiny, cfg, runs=5, dims={"sequence": 16}, progress=False)
    assert b.stats.count == 5
    assert "sequence=16 (given)" in b.feeds


def test_user_feeds_are_validated(mlp: ortlab.Model) -> None:
    with pytest.raises(ortlab.FeedError, match="dtype double, expected float"):
        ortlab.benchmark(mlp, feeds={"input": np.zeros((1, 256))}, runs=1, progress=False)


def test_bad_runs() -> None:
    with pytest.raises(ValueError, match="runs must be >= 1"):
        ortlab.benchmark(ortlab.examples.load("mlp"), runs=0)


@pytest.mark.parametrize("kind", ["distribution", "runs"])
def test_benchmark_plots(mlp: ortlab.Model, kind: str) -> None:
    b = ortlab.benchmark(mlp, runs=20, progress=False)
    fig = b.plot(kind)
    assert len(fig.data) == 1
    with pytest.raises(ValueError, match="choose 'distribution' or 'runs'"):
        b.plot("violin")


@pytest.mark.slow
def test_benchmark_resnet50_levels_agree_with_plain_onnxruntime(resnet50: ortlab.Model) -> None:
    """At each level ortlab's p50 (in the worker) is the same order of magnitude as plain
    onnxruntime's own sess.run loop here (a wrong unit, the session build inside the timed
    region or another model would be off by far more than the factor 3 allowed under load)."""
    import onnxruntime as ort

    feeds = resnet50.example_inputs()
    levels = {
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    for level, ort_level in levels.items():
        b = ortlab.benchmark(
            resnet50, {"level": level}, feeds=feeds, runs=3, warmup=1, progress=False
        )
        assert b.stats.count == 3 and b.report.level == level
        so = ort.SessionOptions()
        so.graph_optimization_level = ort_level
        sess = ort.InferenceSession(str(resnet50.path), so, providers=["CPUExecutionProvider"])
        arrays = dict(feeds)
        sess.run(None, arrays)  # warm-up, as ortlab's
        plain = []
        for _ in range(3):
            t0 = time.perf_counter()
            sess.run(None, arrays)
            plain.append((time.perf_counter() - t0) * 1e3)
        assert 1 / 3 < b.stats.p50_ms / float(np.median(plain)) < 3, (level, b.stats, plain)


def test_latency_stats_exact() -> None:
    s = latency_stats([1_000_000, 2_000_000, 3_000_000, 4_000_000])
    assert (s.count, s.min_ms, s.max_ms, s.mean_ms, s.p50_ms) == (4, 1.0, 4.0, 2.5, 2.5)
    assert s.runs_per_s == pytest.approx(400.0)
    assert np.isnan(latency_stats([]).p50_ms)


def test_paired_ratio_verdicts() -> None:
    rng = np.random.default_rng(0)
    a = 10 + rng.normal(0, 0.3, 30)
    faster = paired_ratio(a, a * 0.7 + rng.normal(0, 0.05, 30))
    assert faster.significant and faster.ratio == pytest.approx(0.7, abs=0.02)
    assert "int8 is 1.42x faster than fp32" in faster.text("fp32", "int8")
    same = paired_ratio(a, a * (1 + rng.normal(0, 0.01, 30)))
    assert not same.significant
    assert "no measurable difference" in same.text()
    slower = paired_ratio(a, a * 1.5)
    assert "1.50x slower" in slower.text()
    assert "not enough rounds for a verdict" in paired_ratio([1.0, 1.0], [2.0, 2.0]).text()


def test_compare_configs_interleaved(mlp: ortlab.Model) -> None:
    c = ortlab.compare_configs(
        mlp,
        [{"level": "disabled"}, {"level": "all"}, {"level": "all", "intra_op_threads": 1}],
        rounds=6,
        runs=5,
        progress=False,
    )
    t = c.to_pandas()
    assert t["label"].tolist() == ["cpu · disabled", "cpu · all", "cpu · all · intra=1"]
    assert t.loc[0, "verdict"] == "baseline" and t.loc[0, "ratio"] == 1.0
    assert (t["ratio_low"] <= t["ratio"]).all() and (t["ratio"] <= t["ratio_high"]).all()
    for r in t.iloc[1:].itertuples():
        models.check_verdict(r.ratio, r.ratio_low, r.ratio_high, r.verdict)
    assert len(c.reports) == 3
    assert ortlab.ConfigComparison.from_json(c.to_json()) == c
    with pytest.raises(ValueError, match="at least two configs"):
        ortlab.compare_configs(mlp, [{}])


def test_interleaved_timing_says_each_fallback_once_and_pairs_against_the_first(
    mlp: ortlab.Model,
) -> None:
    """The one interleaved measurement (measure_interleaved, which compare_configs, compare,
    optimization_diff, ablation and the doctor call): every item's report is checked against
    its config, a miss said once however many items share it, the medians a (rounds x items)
    grid whose verdicts are paired_ratio's against the first column."""
    import warnings

    from ortlab.engine.calls import measure_interleaved

    eps = ortlab.providers()
    if "CUDAExecutionProvider" not in eps.in_build or "CUDAExecutionProvider" in eps.loadable:
        pytest.skip("needs CUDA in the build but not loadable (CPU-only machines: CI)")
    cuda = ortlab.SessionConfig(providers=["cuda", "cpu"], fallback="warn")
    items = [(mlp, cuda), (mlp, cuda.with_(level="basic")), (mlp, cuda.with_(intra_op_threads=1))]
    feeds = mlp.example_inputs()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        at = Run(mlp, cuda, feeds, runs=3, progress=False)
        t = measure_interleaved(items, at, rounds=6, desc="", context="")
    said = [w for w in seen if issubclass(w.category, ortlab.ProviderFallbackWarning)]
    assert len(said) == 1 and "CUDAExecutionProvider" in str(said[0].message)
    assert t.medians_ms.shape == (6, 3) and np.isfinite(t.medians_ms).all()
    assert all(len(lat) == 18 for lat in t.latencies_ns)
    verdicts = t.verdicts(["a", "b", "c"])
    assert verdicts[0][1] == "baseline"
    for k in (1, 2):
        assert verdicts[k][0] == paired_ratio(t.medians_ms[:, 0], t.medians_ms[:, k])
    with pytest.raises(ortlab.ProviderFallbackError):  # the policy of each item's config
        measure_interleaved(
            [(mlp, cuda.with_(fallback="error")), *items[1:]],
            at.with_(runs=1),
            rounds=2,
            desc="",
            context="",
        )


def test_the_median_run_carries_a_distribution_free_interval(mlp: ortlab.Model) -> None:
    """The interval is a pair of order statistics of the measured runs whose coverage of the
    median is what the binomial distribution says (checked with scipy, not ortlab's own sum)."""
    from scipy.stats import binom

    from ortlab.core.units import fmt_interval
    from ortlab.views.benchmark import benchmark_text

    b = ortlab.benchmark(mlp, runs=40, warmup=3, progress=False)
    low, high, coverage = b.p50_interval
    ms = np.sort(np.asarray(b.latencies_ns, dtype=np.float64)) / 1e6
    # the narrowest symmetric pair of order statistics covering the median ≥ 95 %, by scipy
    k = max(j for j in range(1, 21) if 1 - 2 * binom.cdf(j - 1, 40, 0.5) >= 0.95)
    assert (low, high) == (ms[k - 1], ms[len(ms) - k])
    assert low <= b.stats.p50_ms <= high
    assert coverage == pytest.approx(1 - 2 * binom.cdf(k - 1, 40, 0.5))
    said = fmt_interval(b.stats.p50_ms, low, high)  # THE interval format (core.units)
    assert said in benchmark_text(b) and f"{coverage:.1%}" in b._repr_html_()
    few = ortlab.benchmark(mlp, runs=5, warmup=1, progress=False)
    assert all(np.isnan(few.p50_interval)) and "too few runs" in benchmark_text(few)


def test_the_machines_load_is_measured_while_it_is_timed(mlp: ortlab.Model) -> None:
    """A process spinning one core beside the benchmark (not ortlab's: re-parented away from
    this process, as another user's job would be) shows as other processes' load, and the
    result says its times are from a busy machine."""

    from ortlab.core.machine import BUSY_CORES
    from ortlab.views.benchmark import benchmark_text
    from tests.models import busy_core

    with busy_core():  # ORT gets one core, the burner the other
        b = ortlab.benchmark(
            mlp, {"intra_op_threads": 1}, runs=10**7, warmup=1, duration_s=1.5, progress=False
        )
    assert b.other_cores is not None and b.other_cores > max(0.5, BUSY_CORES)
    assert b.busy and "while this was measured" in benchmark_text(b)
    again = ortlab.BenchmarkResult.from_json(b.to_json())
    assert again.other_cores == b.other_cores


def test_an_interleaved_comparison_says_the_load_it_ran_under(mlp: ortlab.Model) -> None:
    """A core burned by another process while configs are compared: the comparison records the
    load (its own process tree excluded) and its text and HTML say the machine was busy."""
    from ortlab.core.machine import BUSY_CORES
    from tests.models import busy_core

    one = {"intra_op_threads": 1}  # a core for ORT, one for the burner
    with busy_core():
        c = ortlab.compare_configs(
            mlp,
            [{"level": "disabled", **one}, {"level": "all", **one}],
            rounds=6,
            runs=3000,
            progress=False,
        )
    assert c.other_cores is not None and c.other_cores > BUSY_CORES
    assert "while this was measured" in c.to_text() and "ortlab-warn" in c._repr_html_()
    quiet = ortlab.compare_configs(
        mlp, [{"level": "disabled"}, {"level": "all"}], rounds=6, runs=50, progress=False
    )
    assert quiet.other_cores is not None
    assert ortlab.ConfigComparison.from_json(c.to_json()).other_cores == c.other_cores


def test_cpu_per_run_and_idle_burn_agree_with_the_os() -> None:
    """Issue 47 item 4: what a run costs in CPU, beside its wall time, read independently from
    the OS (the worker's CPU times through /proc, from this process): the call's whole CPU
    (warm-up, timed runs, the idle window) holds the timed runs' share; a session without
    spinning keeps no core busy once idle, and a run never uses more cores than it has threads
    plus the caller's."""
    import psutil

    from ortlab.engine.worker import get_worker

    m = ortlab.examples.load("mlp")
    ortlab.benchmark(m, {"allow_spinning": False}, runs=5, progress=False)  # the session built
    proc = psutil.Process(get_worker().pid)
    before = sum(proc.cpu_times()[:2])
    b = ortlab.benchmark(m, {"allow_spinning": False}, runs=300, progress=False)
    whole = sum(proc.cpu_times()[:2]) - before
    timed = b.cpu_ms_per_run * b.stats.count / 1e3
    assert 0 < timed <= whole + 0.02  # /proc ticks are 10 ms
    assert b.cores_per_run <= (b.config.intra_op_threads or psutil.cpu_count()) + 1.0
    assert b.idle_cores < 0.15
    assert f"{fmt_ms(b.cpu_ms_per_run)} of CPU per run over all threads" in b.to_text()
    assert "idle after its last run" in b.to_text()
