"""Memory that grows run after run (issue 61, item 2): ``ortlab.soak`` runs a session many times
per phase, each setting in a process of its own, and fits growth per run with an interval. A
setting that grows (changing shapes with the arena on and shrunk after each run: it gives
memory back and takes it again, and the heap keeps what it cannot reuse) is checked against a
plain onnxruntime loop written here, and against the arena's own log; the same inputs stay
flat, and so does the arena as configured once it has seen the largest shape."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlab
from ortlab.analysis.soak import FLAT_MB, MB, SHRINK, SoakResult, SoakSeries
from ortlab.core.errors import OptionError
from ortlab.core.machine import BUSY_CORES
from ortlab.core.stats import theil_sen
from ortlab.diagnosis import rules_resources
from ortlab.diagnosis.facts import Facts
from ortlab.engine._soak_child import SHAPES_SEED
from tests.models import busy_core, facts_of

# the heap's history decides how the resident set moves run after run, and a second test
# process beside it (CI's two) changed a growing series' verdict: run it alone (run-tests)
pytestmark = pytest.mark.alone

RUNS = 30
SEQUENCE = 1024


def _model(path: Path) -> Path:
    """One token block's MatMul + Relu over a free 'sequence' dim: its tensors grow with it."""
    w = np.random.default_rng(0).standard_normal((256, 1024)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "soak",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "sequence", 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "sequence", 1024])],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, path)
    return path


_PLAIN = """
import json, sys, numpy as np, onnxruntime as ort, psutil
path, runs, seq, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
shrink = ort.RunOptions()
if sys.argv[5] == "shrink":
    shrink.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
p, rss, sizes = psutil.Process(), [], np.random.default_rng(seed)
x = np.zeros((1, seq, 256), np.float32)
for i in range(runs):  # the same inputs first, as ortlab's phases run
    s.run(None, {"x": x}, shrink)
for i in range(runs):
    n = max(1, round(seq * (2.0 if i == 0 else 1 + float(sizes.uniform()))))
    x = np.random.default_rng(i).standard_normal((1, n, 256)).astype(np.float32)
    s.run(None, {"x": x}, shrink)
    rss.append(p.memory_info().rss)
print(json.dumps(rss))
"""


@pytest.fixture(scope="module")
def soaked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SoakResult]:
    path = _model(tmp_path_factory.mktemp("soak") / "block.onnx")
    r = ortlab.soak(
        path,
        dims={"sequence": SEQUENCE},
        runs=RUNS,
        phases=["same inputs", "fresh shapes"],
        settings=["as configured", "arena off", SHRINK],
        progress=False,
    )
    return path, r


def _plain(path: Path, setting: str) -> list[int]:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _PLAIN,
            str(path),
            str(RUNS),
            str(SEQUENCE),
            str(SHAPES_SEED),
            setting,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    return list(json.loads(out))


def _shrunk(path: Path) -> SoakSeries:
    """ortlab's soak of the arena shrunk after each run, fresh shapes, measured again."""
    r = ortlab.soak(
        path,
        dims={"sequence": SEQUENCE},
        runs=RUNS,
        phases=["same inputs", "fresh shapes"],
        settings=[SHRINK],
        progress=False,
    )
    return next(x for x in r.rows if x.phase == "fresh shapes")


def test_what_grows_in_a_plain_loop_grows_in_the_soak_and_what_does_not_stays_flat(
    soaked: tuple[Path, SoakResult],
) -> None:
    """The same shapes in a plain onnxruntime loop written here. With the arena shrunk after
    each run the resident set grows there on an idle machine (Theil-Sen slope past the flat
    band), and ortlab's soak must say what the plain loop says: 'grows' with an interval that
    excludes flat where it grows. Whether it grows depends on the heap's history, and so on
    which of ORT's threads ran what: with the second core busy, the plain loop itself measured
    16 KB a run, within the flat band. So the two verdicts are compared, not the slopes, and
    where they disagree both are measured again, back to back, once. Its arena's log shows it
    extend again and again either way. As configured, both stay within the flat band once the
    largest shape was seen."""
    path, r = soaked
    row = next(x for x in r.rows if x.setting == SHRINK and x.phase == "fresh shapes")
    plain = _plain(path, "shrink")
    if row.growing != (theil_sen(plain[row.warmup :])[1] > FLAT_MB * MB):
        row, plain = _shrunk(path), _plain(path, "shrink")  # the machine changed between them
    plain_grows = theil_sen(plain[row.warmup :])[1] > FLAT_MB * MB
    assert row.growing == plain_grows, (row.verdict(), theil_sen(plain[row.warmup :]))
    slope, low, high = row.fit
    assert row.verdict().startswith("grows " if plain_grows else "no growth") or row.flat
    assert low <= slope <= high
    assert row.arena_grown > row.grown  # it gave memory back and took it again
    assert "took it again" in row.arena_said()
    configured = next(
        x for x in r.rows if x.setting == "as configured" and x.phase == "fresh shapes"
    )
    plain = _plain(path, "as configured")
    assert theil_sen(plain[configured.warmup :])[2] < FLAT_MB * MB
    assert not configured.growing, configured.verdict()
    assert configured.arena_grown < row.arena_grown  # extended for the largest, then reused


def test_the_same_inputs_stay_flat_and_the_sentence_names_what_stops_growth(
    soaked: tuple[Path, SoakResult],
) -> None:
    """The same inputs as configured and with the arena off: flat. (Shrunk after each run, the
    arena gives memory back and takes it again even for the same inputs: whether the heap keeps
    some varies from process to process, so it is not asserted; whether fresh shapes grow is
    the test above's, against a plain loop.)"""
    _, r = soaked
    for row in r.rows:
        assert len(row.rss) == RUNS and len(row.arena) == RUNS and not row.error
        if row.phase == "same inputs" and row.setting != SHRINK:
            assert not row.growing, row.verdict()
    off = next(x for x in r.rows if x.setting == "arena off" and x.phase == "fresh shapes")
    assert off.arena_grown == 0  # no arena, no extension in its log
    if r.grows():  # the configured session grows too: what stops it is named
        assert "memory grows as configured" in r.sentence()
        for setting in r.stops_it():
            assert setting in r.sentence()
    t = r.to_pandas()
    assert list(t.columns[:4]) == ["setting", "phase", "runs", "mb_per_run"]
    back = SoakResult.from_json(r.to_json())
    assert back.rows == r.rows and back.sentence() == r.sentence()
    assert "growth per run" in r.to_text() and r.plot().data


def test_a_busy_machine_is_said_and_the_setting_measured_again(
    soaked: tuple[Path, SoakResult],
) -> None:
    """Another process burning a core (as another user's job would) while the soak runs: each
    setting says how many cores other processes used, is measured a second time, and the
    verdict and a note say so, since a busy machine changes whether growth shows at all."""
    path, _ = soaked
    with busy_core():
        r = ortlab.soak(
            path,
            dims={"sequence": SEQUENCE},
            runs=20,
            phases=["same inputs"],
            settings=["as configured"],
            progress=False,
        )
    (row,) = r.rows
    assert row.other_cores is not None and row.other_cores > BUSY_CORES, row
    assert row.busy and row.measured == 2
    assert f"other processes used {row.other_cores:.1f} cores, measured twice" in row.verdict()
    assert any("kept the machine busy while as configured was measured" in n for n in r.notes)
    back = SoakResult.from_json(r.to_json())
    assert back.rows == r.rows  # the load travels with the series


def test_your_feeds_leave_out_the_fresh_shapes_and_bad_arguments_are_refused(
    soaked: tuple[Path, SoakResult],
) -> None:
    path, _ = soaked
    feeds = {"x": np.zeros((1, 8, 256), np.float32)}
    r = ortlab.soak(path, feeds=feeds, runs=10, settings=["as configured"], progress=False)
    assert {x.phase for x in r.rows} == {"same inputs", "fresh inputs"}
    assert any("your feeds fix the shapes" in n for n in r.notes)
    with pytest.raises(OptionError, match="choose from same inputs"):
        ortlab.soak(path, phases=["warm"], progress=False)
    with pytest.raises(OptionError, match="at least 10 runs"):
        ortlab.soak(path, runs=3, progress=False)
    with pytest.raises(OptionError, match="choose from as configured"):
        ortlab.soak(path, settings=["arena on fire"], progress=False)


def _series(setting: str, phase: str, step: int) -> SoakSeries:
    """A phase whose resident set rises ``step`` bytes a run (0: flat), the arena extending
    by half of it."""
    rss = [100 * MB + i * step for i in range(RUNS)]
    return SoakSeries(setting, phase, rss, [i * step // 2 for i in range(RUNS)])


def _facts(soak: SoakResult | None) -> Facts:
    return facts_of(
        model_name="m",
        requested=ortlab.SessionConfig(),
        report=None,
        op_counts={"MatMul": 1},
        baseline_ms=1.0,
        soak=soak,
    )


def test_the_doctors_finding_says_how_fast_where_and_what_stops_it() -> None:
    """memory_growth quotes the soak's verdicts (one number, one home) and offers the setting
    the soak measured flat; nothing is said where memory stays flat."""
    grows = SoakResult(
        model="m",
        config=ortlab.SessionConfig(),
        rows=[
            _series("as configured", "same inputs", 0),
            _series("as configured", "fresh shapes", 3 * MB),
            _series("arena off", "same inputs", 0),
            _series("arena off", "fresh shapes", 0),
        ],
        runs=RUNS,
    )
    (f,) = rules_resources.memory_growth(_facts(grows))
    row = grows.grows()[0]
    assert f.rule == "memory_growth" and "3.00 MB per run" in f.title
    assert row.verdict() in f.evidence and row.arena_said() in f.evidence
    assert "arena off, fresh shapes: flat" in f.evidence
    assert "enable_cpu_mem_arena=False" in f.code and f.severity == "warning"
    flat = dataclasses.replace(grows, rows=[r for r in grows.rows if r.setting == "arena off"])
    assert rules_resources.memory_growth(_facts(flat)) == []
    assert rules_resources.memory_growth(_facts(None)) == []


@pytest.mark.slow
def test_the_doctor_soaks_the_session_and_keeps_what_it_measured(
    soaked: tuple[Path, SoakResult],
) -> None:
    """A doctor on a model with a free dim runs the short soak (as configured and the arena
    off, the same inputs then fresh shapes), keeps it in its result (JSON too), and makes the
    memory_growth finding exactly when the soak says memory grows as configured."""
    path, _ = soaked
    d = ortlab.doctor(
        path,
        dims={"sequence": 256},
        budget_s=60,
        quantize=False,
        transformers=False,
        progress=False,
    )
    assert d.soak is not None
    assert {(x.setting, x.phase) for x in d.soak.rows} == {
        (s, p) for s in ("as configured", "arena off") for p in ("same inputs", "fresh shapes")
    }
    assert bool(d.soak.grows()) == any(f.rule == "memory_growth" for f in d.findings)
    back = ortlab.DoctorResult.from_json(d.to_json())
    assert back.soak is not None and back.soak.rows == d.soak.rows
