"""``ortlab.throughput``: requests/s and latency per concurrency level. Checked against the
result's own records (requests/s is completed requests over the window), plain onnxruntime
timing the same model in this process, the sessions the worker reports it built, and the knee
rule on synthetic curves; never against what a time budget reaches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import ortlab
from ortlab.analysis.throughput import concurrency_levels, find_knee
from ortlab.cli import main
from ortlab.core.stats import MIN_ROUNDS, paired_ratio
from ortlab.engine.tasks_throughput import sessions_fit
from tests.models import silu_cnn
from tests.reference import bare_median_ms


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tp") / "silu_cnn.onnx"
    onnx.save(silu_cnn(), path)
    return path


@pytest.fixture(scope="module")
def tp(cnn: Path) -> ortlab.ThroughputResult:
    return ortlab.throughput(
        cnn,
        concurrency=[2, 1, 2],
        rounds=MIN_ROUNDS,
        duration_s=0.05,
        warmup_s=0.02,
        progress=False,
    )


def test_requests_per_second_is_completed_over_the_window(tp: ortlab.ThroughputResult) -> None:
    assert [(r.mode, r.concurrency) for r in tp.rows] == [
        ("shared", 1),
        ("shared", 2),
        ("per_thread", 1),
        ("per_thread", 2),
    ]
    for r in tp.rows:
        assert len(r.per_round) == len(r.completed) == len(r.window_s) == MIN_ROUNDS
        for rate, done, span in zip(r.per_round, r.completed, r.window_s, strict=True):
            assert done > 0 and span >= tp.duration_s
            assert rate == pytest.approx(done / span)
        assert r.requests == sum(r.completed)
        # the median round, and its distribution-free interval worked out by hand: with six
        # rounds the only pair of order statistics covering the median with 95 % is the
        # extremes (1 - 2 * 0.5**6 = 96.9 %), so the interval is [min, max]
        assert len(r.per_round) == 6
        assert r.requests_per_s == pytest.approx(float(np.median(r.per_round)))
        assert (r.low, r.high) == (min(r.per_round), max(r.per_round))


def test_percentiles_are_ordered(tp: ortlab.ThroughputResult) -> None:
    for r in tp.rows:
        assert 0 < r.p50_ms <= r.p90_ms <= r.p99_ms


def test_per_thread_mode_runs_one_session_per_thread(
    tp: ortlab.ThroughputResult, cnn: Path
) -> None:
    for r in tp.rows:
        assert r.sessions == (1 if r.mode == "shared" else r.concurrency)
    assert tp.sessions_built == 2  # the largest level's sessions, each thread its own
    shared = ortlab.throughput(
        cnn,
        concurrency=[1, 3],
        modes=["shared"],
        rounds=1,
        duration_s=0.02,
        warmup_s=0.0,
        progress=False,
    )
    assert shared.sessions_built == 0 and {r.mode for r in shared.rows} == {"shared"}
    assert shared.knee == {"shared": None}  # one round: no interval, no knee


def test_single_thread_latency_matches_plain_onnxruntime(
    tp: ortlab.ThroughputResult, cnn: Path
) -> None:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(cnn), providers=["CPUExecutionProvider"])
    x = {"x": np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    plain_ms = bare_median_ms(sess, x, runs=300, warmup=20)
    one = next(r for r in tp.rows if r.mode == "shared" and r.concurrency == 1)
    assert plain_ms / 3 <= one.p50_ms <= plain_ms * 3


def test_knee_on_synthetic_curves() -> None:
    rounds = MIN_ROUNDS
    flat = [1.0] * rounds
    # 2 threads double the rate, 4 add nothing: the knee is 2
    rates = [
        [100.0 + i for i in range(rounds)],
        [200.0 + i for i in range(rounds)],
        [201.0 + i for i in range(rounds)],
    ]
    knee, steps = find_knee([1, 2, 4], rates)
    assert knee == 2 and steps[0].significant and not steps[1].significant
    # nothing ever gains: the first level
    assert find_knee([1, 2, 4], [flat, flat, flat])[0] == 1
    # a gain at the last step only: the highest level that gains
    assert find_knee([1, 2, 4], [flat, flat, [1.5] * rounds])[0] == 4
    # a fall is no knee
    assert find_knee([1, 2], [flat, [0.5] * rounds])[0] == 1
    # too few rounds for an interval: no knee at all
    assert find_knee([1, 2], [[1.0] * 3, [2.0] * 3])[0] is None
    assert find_knee([1], [flat])[0] == 1
    # two steps each within noise that add up to a gain: the knee is where the gain is, so the
    # sentence never says "the knee is 1" beside "4 still adds throughput"
    rng = np.random.default_rng(0)
    n = 12
    base = 100 * (1 + rng.normal(0, 0.01, n))
    mid = base * (1.015 + rng.normal(0, 0.002, n))
    top = base * (1.03 + rng.normal(0, 0.002, n))
    knee, steps = find_knee([1, 2, 4], [list(base), list(mid), list(top)])
    assert not steps[0].significant and not steps[1].significant
    assert knee == 4
    assert not paired_ratio(top, base).holds_one


@pytest.mark.parametrize("bad", [[0], [-1], [1.5], "1,2", [], [True], None, [1, "2"]])
def test_bad_concurrency_is_refused(bad: object, cnn: Path) -> None:
    with pytest.raises(ortlab.ConcurrencyError):
        ortlab.throughput(cnn, concurrency=bad, progress=False)  # type: ignore[arg-type]


def test_levels_are_deduplicated_and_sorted() -> None:
    assert concurrency_levels([4, 1, 2, 4, np.int64(2)]) == [1, 2, 4]
    with pytest.raises(ortlab.ConcurrencyError):
        ortlab.throughput("nowhere.onnx", modes=["pool"], progress=False)


def test_sessions_that_do_not_fit_are_refused_with_numbers() -> None:
    assert sessions_fit(100 << 20, 4, 8 << 30) is None
    why = sessions_fit(1 << 30, 8, 4 << 30)
    assert why is not None and "8 sessions" in why and "modes=['shared']" in why


def test_json_round_trip_and_renderers(tp: ortlab.ThroughputResult) -> None:
    back = ortlab.ThroughputResult.from_json(tp.to_json())
    assert back == tp
    assert list(tp.to_pandas()["concurrency"]) == [1, 2, 1, 2]
    text = tp.to_text()
    assert "req/s" in text and f"{tp.cpu_count} cores" in text
    assert "intra_op_threads=0" in text
    assert all(s in text for s in tp.sentences.values())
    assert "<table" in tp._repr_html_()
    assert tp.plot() is not None and tp.plot("latency") is not None
    assert set(tp.knee) == {"shared", "per_thread"}
    assert "synthetic" in text and tp.synthetic


def test_cli_prints_the_table(cnn: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "throughput",
            str(cnn),
            "--concurrency",
            "1,2",
            "--rounds",
            "2",
            "--duration",
            "0.02",
            "--modes",
            "shared",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "threads share one session" in out and "req/s" in out and "p99" in out
    assert "one session per thread" not in out


def test_throughput_on_a_busy_machine_says_so(cnn: Path) -> None:
    """Requests/s measured while another process burns a core carry that load in their notes
    (one thread at a time read 5.0 req/s in one mode and 11.6 in the other on such a machine,
    with nothing said: both read about 50 on the idle machine, as the benchmark's p50 does)."""
    from tests.models import busy_core

    with busy_core():
        busy = ortlab.throughput(cnn, concurrency=[1], rounds=2, duration_s=0.3, progress=False)
    assert any("while this was measured" in n and "spin" in n for n in busy.notes), busy.notes
    assert "while this was measured" in busy.to_text()
