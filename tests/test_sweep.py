"""``ortlab.sweep``: per-shape latency (median with its interval), placement and memory, and
predicted target shares. Checked: the interval is the order-statistic one and holds the median,
memory grows with the batch (ORT's own allocator record), a refused shape is a row with its
error while the others are measured, bad dims are refused, and the rows agree with the verbs
they come from run on their own."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlab
from ortlab.analysis.sweep import MAX_POINTS, SweepError, _latency
from ortlab.cli import main
from ortlab.core.stats import median_interval
from tests.models import make, vi


@pytest.fixture(scope="module")
def bert() -> ortlab.SweepResult:
    return ortlab.sweep(
        ortlab.examples.path("bert_tiny"),
        dims={"sequence": [8, 32], "batch": [1, 4]},
        targets=["nnapi"],
        runs=12,
        progress=False,
    )


def test_every_combination_is_a_row_with_its_interval(bert: ortlab.SweepResult) -> None:
    assert [r.dims for r in bert.rows] == [
        {"sequence": 8, "batch": 1},
        {"sequence": 8, "batch": 4},
        {"sequence": 32, "batch": 1},
        {"sequence": 32, "batch": 4},
    ]
    for r in bert.rows:
        assert not r.error and r.runs == 12
        assert r.low_ms <= r.p50_ms <= r.high_ms
        assert sum(r.nodes_per_ep.values()) > 0 and r.fallbacks == 0 and r.memcpy == 0
        assert 0 < r.predicted["nnapi"] <= 1
    # ORT's allocator record: four times the batch never needs less memory
    by = {(r.dims["sequence"], r.dims["batch"]): r.peak_bytes for r in bert.rows}
    assert by[8, 4] >= by[8, 1] > 0 and by[32, 4] >= by[32, 1] > 0


def test_rows_agree_with_the_verbs_run_alone(bert: ortlab.SweepResult) -> None:
    point = {"sequence": 32, "batch": 4}
    pl = ortlab.placement(ortlab.examples.path("bert_tiny"), dims=point, progress=False)
    alone = {}
    for r in pl.node_rows:
        if r.partition >= 0:
            alone[r.provider] = alone.get(r.provider, 0) + 1
    row = next(r for r in bert.rows if r.dims == point)
    assert row.nodes_per_ep == alone
    w = ortlab.whatif(ortlab.examples.path("bert_tiny"), ["nnapi"], dims=point, progress=False)
    rows = [r for r in w["nnapi"].node_rows if r.partition >= 0]
    on = sum(1 for r in rows if r.provider == w.targets[0].ep)
    assert row.predicted["nnapi"] == pytest.approx(on / len(rows))
    assert bert.taken_by("nnapi", 0.0) == [r.dims for r in bert.rows]


def test_the_latency_interval_is_the_median_order_statistic_one() -> None:
    ns = np.arange(1, 31) * 1_000_000  # 1..30 ms
    p50, low, high = _latency(ns)
    k, coverage = median_interval(30)  # type: ignore[misc]
    assert p50 == 15.5 and (low, high) == (float(k), float(31 - k)) and coverage >= 0.95
    assert math.isnan(_latency([1_000_000] * 5)[1])  # 5 runs: [min, max] covers < 95 %


def test_a_shape_the_model_refuses_is_a_row_with_its_error(tmp_path: Path) -> None:
    """x[n] reshaped to [2, -1]: an odd n cannot run."""
    shape = numpy_helper.from_array(np.array([2, -1], np.int64), "shape")
    model = make(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], "r")],
        [vi("x", TensorProto.FLOAT, ["n"])],
        [vi("y", TensorProto.FLOAT, [2, None])],
        [shape],
    )
    path = tmp_path / "even.onnx"
    onnx.save(model, path)
    s = ortlab.sweep(path, dims={"n": [4, 5, 6]}, runs=6, progress=False)
    ok = {r.dims["n"]: r for r in s.rows}
    assert not ok[4].error and not ok[6].error and ok[4].runs == 6
    assert ok[5].error and math.isnan(ok[5].p50_ms) and "Reshape" in ok[5].error
    assert "n=5" in s.to_text() and "failed" in s.to_text()


@pytest.mark.parametrize(
    ("dims", "match"),
    [
        ({}, "dims is empty"),
        ({"batch": [-1, 1]}, "non-negative integers"),
        ({"batch": "1,2"}, "non-negative integers"),
        (
            {"a": list(range(1, 10)), "b": list(range(1, 10))},
            f"more than a sweep measures \\({MAX_POINTS}",
        ),
    ],
)
def test_bad_dims_are_refused(dims: dict, match: str) -> None:
    with pytest.raises(SweepError, match=match):
        ortlab.sweep(ortlab.examples.path("mlp"), dims=dims, progress=False)


def test_round_trip_and_cli(bert: ortlab.SweepResult, capsys: pytest.CaptureFixture[str]) -> None:
    back = ortlab.SweepResult.from_json(bert.to_json())
    assert back.rows == bert.rows
    frame = bert.to_pandas()
    assert {
        "sequence",
        "batch",
        "p50_ms",
        "low_ms",
        "high_ms",
        "peak_bytes",
        "predicted:nnapi",
    } <= set(frame.columns)
    fig = bert.plot()
    assert len(fig.data[0].x) == 4
    assert main(["sweep", "bert_tiny", "--dim", "sequence=8,16", "--runs", "6"]) == 0
    out = capsys.readouterr().out
    assert "sequence=8" in out and "sequence=16" in out and "p50 ms [95 % interval]" in out
    assert main(["sweep", "bert_tiny", "--dim", "sequence=a"]) == 2
    assert "'sequence=a' is not name=int,int" in capsys.readouterr().err


def test_progress_true_shows_a_bar_and_a_callback_counts_the_shapes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``progress=True`` draws a bar per shape (it drew nothing); a callable hears each shape."""
    mlp = ortlab.examples.path("mlp")
    s = ortlab.sweep(mlp, dims={"batch": [1, 2]}, runs=3, progress=True)
    assert len(s.rows) == 2 and "sweep" in capsys.readouterr().err
    heard: list[tuple[int, int]] = []
    ortlab.sweep(mlp, dims={"batch": [1, 2, 3]}, runs=3, progress=lambda d, t: heard.append((d, t)))
    assert heard == [(1, 3), (2, 3), (3, 3)]
