"""``ortlab.roofline``: each node's measured time against the work its shapes imply and the
machine's ceilings measured with ORT. Checked: the arithmetic of every row against its own
inputs, the times against the profile's (one node time everywhere), the GEMM ceiling against
plain onnxruntime timing the same GEMM in this process, and the physical limits of this CPU."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

import ortlab
from ortlab.analysis.limits.ceilings import is_bandwidth
from ortlab.cli import main
from ortlab.core.config import SessionConfig
from ortlab.core.machine import cache_levels
from ortlab.engine import tasks_peaks
from tests.models import silu_cnn


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("roof") / "silu_cnn.onnx"
    onnx.save(silu_cnn(channels=32), path)
    return path


@pytest.fixture(scope="module")
def roof(cnn: Path) -> ortlab.RooflineResult:
    return ortlab.roofline(cnn, {"level": "all"}, runs=8, progress=False)


def test_every_row_is_its_own_arithmetic(roof: ortlab.RooflineResult) -> None:
    assert roof.bandwidth > 0 and roof.peak_flops("fp32") > 0 and roof.cache_bytes > 0
    assert {r.kind for r in roof.rows} >= {"compute"}
    for r in roof.rows:
        s = r.us / 1e6
        assert r.achieved_flops == pytest.approx((r.flops or 0.0) / s)
        assert r.achieved_bytes == pytest.approx(r.bytes / s)
        # a call is bound by the nearest cache level its bytes fit (never below a level
        # further out, nor DRAM's: a nearer cache is not slower), else by DRAM's
        fit = [v for v in roof.levels if 0 < r.bytes <= roof.capacity(v)]  # one call per run
        outer = [roof.bandwidth, *(roof.level_bandwidth(v.name) for v in fit)]
        assert r.level == (fit[0].name if fit else "DRAM")
        assert r.bandwidth == max(outer)
        bw = r.bandwidth
        if r.flops > 0:
            ridge = r.intensity * bw
            assert r.attainable == pytest.approx(min(r.peak_flops, ridge))
            assert r.bound == ("compute" if ridge >= r.peak_flops else "memory")
            assert r.achieved_fraction == pytest.approx(r.achieved_flops / r.attainable)
        elif r.bytes > 0:
            assert r.bound == "memory" and r.attainable == bw
    # the rows are the profile's nodes: their shares are the profile's and add up to 1
    assert sum(r.share for r in roof.rows) == pytest.approx(1.0)
    assert roof.time_share(0) == pytest.approx(
        sum(r.share for r in roof.rows if not math.isnan(r.achieved_fraction))
    )


def test_times_are_the_node_times_the_profile_shows(cnn: Path) -> None:
    """One node time: the roofline's ``us`` is ProfileResult.by_node's us_per_run on the same
    profile; checked here on a profile parsed from the result's own fields."""
    r = ortlab.roofline(cnn, {"level": "all"}, runs=5, progress=False)
    conv = [x for x in r.rows if x.kind == "compute"]
    assert conv and all(x.us > 0 for x in conv)
    assert r.runs == 5 and "median run" in " ".join(r.notes)
    prof = ortlab.profile(cnn, {"level": "all"}, runs=5, progress=False)
    # the kernels are the same ones the profiler names (times differ: another session)
    assert {x.node for x in r.rows} == set(prof.by_node()["node"])


def _plain_fp32_rate(rounds: int = 10) -> float:
    """Best FLOP/s of fp32's two ceiling kernels (the 1024-square GEMM and the 256-channel 3x3
    Conv), built here from their shapes and timed with plain onnxruntime as the ceiling times
    them: no spinning, ``rounds`` rounds of three runs back to back, the best of both kernels.
    The Conv counts too: with both cores busy its 3 ms runs still caught quiet moments (best 348
    GFLOP/s, idle 378) while the 7 ms GEMM's did not (best 156, idle 335), so the GEMM alone
    read 2-3x under a ceiling the Conv had set."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    n, c, side = tasks_peaks.GEMM_N, tasks_peaks.CONV_CHANNELS, tasks_peaks.CONV_SIDE
    rng = np.random.default_rng(0)
    kernels = [  # (node, input shape, weight shape, FLOPs a run)
        (helper.make_node("MatMul", ["x", "w"], ["y"]), [n, n], [n, n], 2.0 * n**3),
        (
            helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
            [1, c, side, side],
            [c, c, 3, 3],
            2.0 * c * c * 9 * side * side,
        ),
    ]
    opts = ort.SessionOptions()
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")  # as the ceiling's
    best = 0.0
    for node, x_shape, w_shape, flops in kernels:
        w = numpy_helper.from_array(rng.standard_normal(w_shape).astype(np.float32), "w")
        graph = helper.make_graph(
            [node],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, x_shape)],
            initializer=[w],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        sess = ort.InferenceSession(
            model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )
        feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
        sess.run(None, feeds)
        fastest = math.inf
        for _ in range(rounds * 3):
            t0 = time.perf_counter()
            sess.run(None, feeds)
            fastest = min(fastest, time.perf_counter() - t0)
        best = max(best, flops / fastest)
    return best


def test_the_ceilings_agree_with_plain_onnxruntime_and_physics(cnn: Path) -> None:
    """The fp32 ceiling against the same kernels timed with plain onnxruntime here, both
    measured now (the session's ceilings are forgotten first: a ceiling kept from an idle moment
    set against a plain loop on a busy one differed 3.6x), the plain ones just before and just
    after, their best kept as the ceiling keeps its best."""
    from ortlab.analysis.limits import ceilings

    ceilings.forget()
    before = _plain_fp32_rate()
    roof = ortlab.roofline(cnn, {"level": "all"}, runs=8, progress=False)
    plain = max(before, _plain_fp32_rate())
    peak = roof.peak_flops("fp32")
    # the same kernels, the best of their runs each side: equal but for a busy machine's noise;
    # a unit or work error would be 1000x
    assert plain / 3 < peak < plain * 3, (plain, peak)
    # no CPU core does more than 2 AVX-512 FMA a cycle (64 fp32 FLOPs) at 6 GHz
    assert peak < (os.cpu_count() or 1) * 64 * 6e9
    assert roof.bandwidth < 2e12  # no socket streams 2 TB/s from DRAM
    assert all(roof.level_bandwidth(v.name) < 1e14 for v in roof.levels)
    for p in roof.peaks:
        assert p.error or p.best >= p.median > 0
        # three back to back per round (twenty for a kernel of microseconds), from whichever
        # measurement of this session was best
        per_round = (3, 20) if p.dtype != "memory" and ceilings.is_bandwidth(p.dtype) else (3,)
        assert p.error or (min(p.runs % n for n in per_round) == 0 and p.runs > 0)
        assert p.measured >= 1


def test_result_round_trips_and_renders(roof: ortlab.RooflineResult) -> None:
    back = ortlab.RooflineResult.from_json(roof.to_json())
    assert back.rows == roof.rows and back.peaks == roof.peaks
    frame = roof.to_pandas()
    assert {"node", "us", "flops", "bytes", "intensity", "achieved_fraction", "bound"} <= set(
        frame.columns
    )
    assert list(frame["us"]) == sorted(frame["us"], reverse=True)
    text = roof.to_text()
    assert "Ceilings (measured with ORT on this EP;" in text
    fp32 = next(p for p in roof.peaks if p.dtype == "fp32")
    assert fp32.what in ("fp32 GEMM", "fp32 NCHWc Conv") and fp32.what in text
    fig = roof.plot()
    dots = sum(len(t.x) for t in fig.data if t.mode == "markers")
    assert dots == sum(1 for r in roof.rows if r.flops > 0 and r.bytes > 0)
    roofs = [t for t in fig.data if t.mode == "lines" and "(predicted)" not in (t.name or "")]
    slopes = sum(1 for p in roof.peaks if is_bandwidth(p.dtype) and not p.error)
    assert len(roofs) == slopes * sum(
        1 for p in roof.peaks if not is_bandwidth(p.dtype) and not p.error
    )


def test_cli_roofline(cnn: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["roofline", str(cnn), "--runs", "3", "--top", "4"]) == 0
    out = capsys.readouterr().out
    assert "of node time runs at half its bound or more" in out and "Slowest nodes" in out


def test_ceilings_keep_the_best_of_every_measurement() -> None:
    """A peak is the most the machine did: a later, slower measurement (a busy moment) never
    lowers it, a faster one raises it, and a failed one never replaces a measured one."""
    from ortlab.analysis.limits import ceilings
    from ortlab.engine.replies import PeakRuns

    cfg = ortlab.SessionConfig(intra_op_threads=3)  # settings no other test measures
    ceilings.record(cfg, [PeakRuns("fp32 GEMM", "fp32", 2e9, [0.02, 0.01, 0.04])])
    first = ceilings.known(cfg, ["fp32"])
    assert first is not None and first[0].best == pytest.approx(2e9 / 0.01)
    ceilings.record(cfg, [PeakRuns("fp32 GEMM", "fp32", 2e9, [0.05, 0.04])])  # busy: slower
    kept = ceilings.known(cfg, ["fp32"])
    assert kept is not None and kept[0].best == pytest.approx(2e11) and kept[0].measured == 2
    ceilings.record(cfg, [PeakRuns("fp32 GEMM", "fp32", 2e9, [], error="no kernel")])
    ceilings.record(cfg, [PeakRuns("fp32 GEMM", "fp32", 2e9, [0.008])])
    best = ceilings.known(cfg, ["fp32"])
    assert best is not None and best[0].best == pytest.approx(2e9 / 0.008) and not best[0].error
    assert ceilings.known(cfg, ["fp32", "int8"]) is None
    assert ceilings.known(ortlab.SessionConfig(intra_op_threads=5), ["fp32"]) is None


def test_fp32s_ceiling_is_the_faster_of_the_gemm_and_the_nchwc_conv(tmp_path: Path) -> None:
    """fp32's ceiling is the best of ORT's kernels for the class: the task times a GEMM and a
    Conv (NCHWc after ORT's layout transformer on this CPU), and the fold keeps the faster,
    the two counting as one measurement; the Conv's work is its own arithmetic."""
    from ortlab.analysis.limits import ceilings
    from ortlab.engine import tasks_peaks

    # settings no other test measures (one kernel each: the parallel mode changes nothing)
    cfg = ortlab.SessionConfig(intra_op_threads=1, execution_mode="parallel")
    kernels = tasks_peaks.peak_kernels(cfg, ["fp32"], tmp_path)
    for _ in range(3):
        for k in kernels:
            k.time_once()
    runs = [k.result() for k in kernels]
    fp32 = [r for r in runs if r.dtype == "fp32"]
    assert {r.what for r in fp32} == {"fp32 GEMM", "fp32 NCHWc Conv"}
    conv = next(r for r in fp32 if "Conv" in r.what)
    c, side = tasks_peaks.CONV_CHANNELS, tasks_peaks.CONV_SIDE
    assert conv.work == 2 * (c * 3 * 3) * c * side * side  # a MAC per weight per output pixel
    ceilings.record(cfg, runs)
    (kept,) = ceilings.known(cfg, ["fp32"]) or []
    fastest = max(fp32, key=lambda r: r.work / min(r.seconds))
    assert kept.what == fastest.what and kept.measured == 1
    assert kept.best == pytest.approx(fastest.work / min(fastest.seconds))


def test_two_rooflines_read_the_same_ceilings(cnn: Path) -> None:
    """One measurement per session: a second roofline at the same EP and thread settings (at
    another optimization level) holds the very same Peak objects, not a second measurement —
    unless one of its nodes beat a ceiling (a busy machine read the kernel low), which then
    is that node's rate, the measurement the same (raise_to)."""
    roof = ortlab.roofline(cnn, {"level": "all"}, runs=3, progress=False)
    again = ortlab.roofline(cnn, {"level": "basic"}, runs=3, progress=False)
    by_dtype = {p.dtype: p for p in roof.peaks}
    for p in again.peaks:
        first = by_dtype.get(p.dtype)
        if first is None or p.measured != first.measured:
            continue
        if p.reached_by == first.reached_by:
            assert p is first
        else:  # raised by a node of the second model: the same measurement, a higher best
            assert p.median == first.median and p.runs == first.runs and p.best > first.best
    assert again.peak_flops("fp32") >= roof.peak_flops("fp32")


def test_a_ceiling_a_busy_moment_halved_is_measured_again(cnn: Path) -> None:
    """A ceiling measured far too low (as on a machine busy at that moment) puts nodes above the
    roof; the roofline measures the ceilings again, keeps the best, and the nodes come down."""
    from ortlab.analysis.limits import ceilings
    from ortlab.engine.replies import PeakRuns

    cfg = ortlab.SessionConfig(level="all", intra_op_threads=1)
    ceilings.record(
        cfg,
        [
            PeakRuns("fp32 GEMM", "fp32", 1e6, [1.0]),  # 1 MFLOP/s
            PeakRuns("fp32 stream (Add)", "memory", 1e6, [1.0]),
            *(PeakRuns(f"{v.name} Add", v.name, 1e6, [1.0]) for v in cache_levels()),
            PeakRuns("int8 GEMM", "int8", 1e6, [1.0]),
            PeakRuns("fp16 GEMM", "fp16", 1e6, [1.0]),
        ],
    )
    r = ortlab.roofline(cnn, cfg, runs=5, progress=False)
    assert r.peak_flops("fp32") > 1e9, "the absurd ceiling was replaced by a measurement"
    assert any("measured again" in n for n in r.notes)
    assert max(row.achieved_fraction for row in r.rows if row.kind == "compute") < 50


def test_an_op_without_a_formula_is_bound_unknown_and_in_no_verdict() -> None:
    """A node ortlab cannot count (no formula: FLOPs NaN, kind 'unknown') is never called
    memory-bound nor counted near or far from a roof: the verdicts read only counted nodes."""
    from ortlab.analysis.limits.roofline import NEAR, RooflineResult, RoofRow

    unknown = RoofRow(
        "rot",
        "RotaryThing",
        "CPUExecutionProvider",
        900.0,
        0.9,
        math.nan,
        4e6,
        "fp32",
        "unknown",
        1e11,
        1e10,
    )
    counted = RoofRow(
        "mm", "MatMul", "CPUExecutionProvider", 100.0, 0.1, 1e7, 1e3, "fp32", "compute", 1e11, 1e10
    )
    assert unknown.bound == "unknown" and math.isnan(unknown.achieved_fraction)
    roof = RooflineResult(
        model="m", config=SessionConfig(), peaks=[], rows=[unknown, counted], runs=1
    )
    assert roof.time_share(0) == pytest.approx(0.1)  # only the counted node has a fraction
    assert not roof.near_limits and roof.time_share(NEAR) <= 0.1
    assert "unknown" in set(roof.nodes["bound"])


def test_an_embedding_lookup_sits_under_its_roof() -> None:
    """genai's int4 decoder at a decode step: its embedding Gather moves the id, the one row it
    copies and that row out (counted by hand from the table's width), not the whole table,
    so it is a memory-bound row under the bandwidth ceiling (it sat at 6,799-13,899 % of it
    when the whole table counted)."""
    import onnx
    from onnx import numpy_helper

    from ortlab.analysis.limits.roofline import ABOVE

    folder = Path(ortlab.__file__).parent / "decoders" / "genai_int4"
    r = ortlab.roofline(folder, dims={"prompt": 1, "past": 16}, runs=5, progress=False)
    proto = onnx.load(str(ortlab.load(folder).path))
    gather = next(n for n in proto.graph.node if n.op_type == "Gather" and "embed" in n.name)
    table = next(i for i in proto.graph.initializer if i.name == gather.input[0])
    width = numpy_helper.to_array(table).shape[1]
    row = next(x for x in r.rows if x.node == gather.name)
    assert row.bytes == 8 + 2 * width * 4, (row.bytes, width)  # int64 id, the row in and out
    assert row.bound == "memory" and row.achieved_fraction < ABOVE
