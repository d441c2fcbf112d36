"""ProfileResult.to_perfetto: the Chrome-trace file Perfetto opens, checked against the profile."""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

import ortlab
from ortlab.analysis.perfetto import _lanes, flow_events, node_names, perfetto_trace
from ortlab.analysis.profiling import ProfileData, ProfileResult
from ortlab.cli import main
from ortlab.core.config import SessionConfig
from ortlab.core.eps import label
from tests import models


@pytest.fixture(scope="module")
def mlp_profile() -> ProfileResult:
    return ortlab.profile(ortlab.examples.path("mlp"), runs=4, warmup=1, progress=False)


@pytest.fixture(scope="module")
def mlp_placement() -> Any:
    return ortlab.placement(
        ortlab.examples.path("mlp"), {"level": "all"}, runs=3, warmup=1, progress=False
    )


def _load(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text(encoding="ascii"))
    assert set(doc) == {"traceEvents", "displayTimeUnit", "metadata"}
    return doc


def _slices(doc: dict[str, Any], cat: str = "node") -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == cat]


def _assert_tracks_nest(doc: dict[str, Any]) -> None:
    """On every (pid, tid) track, slices follow one another or nest; never a partial overlap."""
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        open_ends: list[float] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -(s[1] - s[0]))):
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1], "slices overlap improperly"
            open_ends.append(end)


def test_every_event_is_one_slice_with_its_duration(
    mlp_profile: ProfileResult, tmp_path: Path
) -> None:
    out = mlp_profile.to_perfetto(tmp_path / "t.json")
    assert out == (tmp_path / "t.json").absolute()
    doc = _load(out)
    d = mlp_profile.data
    want = Counter(
        (d.node[k], r, s, du)
        for k, r, s, du in zip(d.ev_node, d.ev_run, d.ev_start_us, d.ev_dur_us, strict=True)
    )
    runs = {e["args"]["run"]: e["ts"] for e in _slices(doc, "run")}
    got = Counter(
        (e["args"]["kernel"], e["args"]["run"], e["ts"] - runs[e["args"]["run"]], e["dur"])
        for e in _slices(doc)
    )
    assert got == want and sum(got.values()) == len(d.ev_node)
    _assert_tracks_nest(doc)


def test_tracks_runs_threads_and_memory(mlp_profile: ProfileResult, tmp_path: Path) -> None:
    doc = _load(mlp_profile.to_perfetto(tmp_path / "t.json"))
    d = mlp_profile.data
    ev = doc["traceEvents"]
    procs = {
        e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"
    }
    node_pids = {e["pid"] for e in _slices(doc)}
    assert {procs[p] for p in node_pids} == {label(p) for p in d.provider}
    # one thread track per OS thread ORT recorded, named after its id
    assert d.threads and len(d.ev_thread) == len(d.ev_node)
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in ev
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    used = {names[(e["pid"], e["tid"])] for e in _slices(doc)}
    assert used == {f"thread {t}" for t in d.threads}
    # the run markers: one per measured run, as long as ORT's model_run, at its recorded start
    marks = sorted(_slices(doc, "run"), key=lambda e: e["ts"])
    assert [m["dur"] for m in marks] == d.run_us
    assert len(d.run_start_us) == len(d.run_us)
    assert [m["ts"] for m in marks] == [s - d.run_start_us[0] for s in d.run_start_us]
    assert all(a["ts"] + a["dur"] <= b["ts"] for a, b in itertools.pairwise(marks))
    # memory counters: the allocator after each node of the last run, per node as ORT said
    counters = [e for e in ev if e["ph"] == "C"]
    assert counters and all(e["pid"] in node_pids for e in counters)
    recorded = sorted(v for v in d.in_use_bytes if v >= 0)
    assert sorted(c["args"]["in_use_bytes"] for c in counters) == recorded


def test_original_names_from_the_join(mlp_placement: Any, tmp_path: Path) -> None:
    prof = mlp_placement.profile
    doc = _load(mlp_placement.to_perfetto(tmp_path / "t.json"))
    original = {r.node for r in mlp_placement.node_rows}
    fused = {r.node for r in mlp_placement.optimized_rows if len(r.fused_from) > 1}
    assert fused, "level 'all' fuses the MLP's MatMul+Add(+Relu)"
    for e in _slices(doc):
        assert e["name"] in original and e["args"]["name_from"] == "placement join"
        if e["args"]["kernel"] in fused:
            assert e["name"] != e["args"]["kernel"]
            assert e["name"] in e["args"]["original_nodes"]
            assert mlp_placement.nodes.set_index("node").loc[e["name"], "op_type"] == "MatMul"
    # without the join, ORT's kernel names, saying so
    plain = _load(prof.to_perfetto(tmp_path / "k.json"))
    assert {e["name"] for e in _slices(plain)} == set(prof.data.node)
    assert all(e["args"]["name_from"].startswith("kernel") for e in _slices(plain))


def test_control_flow_bodies_nest_and_level_disabled_keeps_names(tmp_path: Path) -> None:
    m = models.with_if()
    p = ortlab.profile(m, {"level": "disabled"}, runs=3, warmup=1, progress=False)
    doc = _load(p.to_perfetto(tmp_path / "if.json", model=m))
    _assert_tracks_nest(doc)
    slices = _slices(doc)
    assert len(slices) == len(p.data.ev_node)
    assert {e["name"] for e in slices} <= {"sum", "gt", "if", "then_relu", "else_neg", "else_abs"}
    assert all(e["args"]["name_from"] == "model (same name)" for e in slices)


def _hand_made(weird: str) -> ProfileData:
    """Two EPs and a Memcpy, as a CUDA session would record them (no second EP is faked in a
    session: this is data for the pure builders)."""
    cuda, cpu = "CUDAExecutionProvider", "CPUExecutionProvider"
    t = (("float", (1, 4)),)
    return ProfileData(
        node=["pre", "MemcpyFromHost", weird, "MemcpyToHost", "post"],
        op_type=["Relu", "MemcpyFromHost", "Gemm", "MemcpyToHost", "Softmax"],
        provider=[cpu, cuda, cuda, cuda, cpu],
        input_types=[t] * 5,
        output_types=[t] * 5,
        ev_node=[0, 1, 2, 3, 4] * 2,
        ev_run=[0] * 5 + [1] * 5,
        ev_start_us=[1.0, 3.0, 6.0, 10.0, 13.0] * 2,
        ev_dur_us=[2.0, 3.0, 4.0, 3.0, 2.0] * 2,
        run_us=[16.0, 17.0],
        in_use_bytes=[100, 200, 300, 200, 150],
        peak_bytes=[100, 200, 300, 300, 300],
        arena_bytes=[-1] * 5,
    )


def test_flows_connect_existing_slices_across_eps() -> None:
    d = _hand_made("gemm")
    edges = [
        ("pre", "MemcpyFromHost", "x"),
        ("MemcpyToHost", "post", "y"),
        ("nowhere", "post", "z"),
    ]
    doc = perfetto_trace(d, edges=edges)
    _assert_tracks_nest(doc)
    ev = doc["traceEvents"]
    starts = [e for e in ev if e["ph"] == "s"]
    ends = {e["id"]: e for e in ev if e["ph"] == "f"}
    assert len(starts) == 4 and {s["id"] for s in starts} == set(ends)  # 2 edges x 2 runs
    slices = _slices(doc)

    def owner(e: dict[str, Any]) -> str:
        hits = [
            s
            for s in slices
            if (s["pid"], s["tid"]) == (e["pid"], e["tid"])
            and s["ts"] <= e["ts"] <= s["ts"] + s["dur"]
        ]
        assert hits, "a flow end outside every slice"
        return str(hits[-1]["name"])

    pairs = Counter((owner(s), owner(ends[s["id"]])) for s in starts)
    assert pairs == {("pre", "MemcpyFromHost"): 2, ("MemcpyToHost", "post"): 2}
    assert all(ends[s["id"]]["bp"] == "e" for s in starts)
    # two EP processes, and the flow crosses between them
    procs = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {"runs", "CUDA", "CPU"}
    assert flow_events(d, [], np.zeros(10), [(0, 0)] * 10) == []


def test_model_strings_survive_as_data(tmp_path: Path) -> None:
    weird = "<script>alert(\"x\")</script>\n'q' \\ \u2028 µ"
    d = _hand_made(weird)
    res = ProfileResult(model=weird, config=SessionConfig(level="all"), data=d)
    doc = _load(res.to_perfetto(tmp_path / "w.json"))
    names = {e["name"] for e in _slices(doc)}
    assert weird in names and doc["metadata"]["model"] == weird
    assert all(n.source.startswith("kernel") for n in node_names(d, level="all"))
    memcpy = [e for e in _slices(doc) if e["args"]["op_type"] == "MemcpyToHost"]
    assert memcpy[0]["args"]["name_from"].startswith("kernel (inserted by ORT")


def test_old_profiles_load_and_lay_runs_out(mlp_profile: ProfileResult, tmp_path: Path) -> None:
    again = ProfileResult.from_json(mlp_profile.to_json())
    assert again.data == mlp_profile.data
    env = json.loads(mlp_profile.to_json())
    found = [k for k in ("threads", "ev_thread", "run_start_us") if k in json.dumps(env)]
    assert found == ["threads", "ev_thread", "run_start_us"]

    def strip(x: Any) -> Any:  # the JSON of a profile saved before these fields existed
        if isinstance(x, dict):
            return {
                k: strip(v)
                for k, v in x.items()
                if k not in ("threads", "ev_thread", "run_start_us")
            }
        return [strip(v) for v in x] if isinstance(x, list) else x

    old = ProfileResult.from_json(json.dumps(strip(env)))
    assert old.data.threads == [] and old.data.run_start_us == []
    doc = _load(old.to_perfetto(tmp_path / "old.json"))
    _assert_tracks_nest(doc)
    marks = sorted(_slices(doc, "run"), key=lambda e: e["ts"])
    assert [m["dur"] for m in marks] == old.data.run_us
    assert len(_slices(doc)) == len(old.data.ev_node)


def test_lanes_split_improper_overlaps_only() -> None:
    starts = np.array([0.0, 1.0, 5.0, 6.0, 20.0])
    ends = np.array([10.0, 4.0, 12.0, 8.0, 25.0])  # [5, 12) crosses the end of [0, 10)
    lane = _lanes(starts, ends, np.zeros(5, dtype=np.int64))
    assert lane.tolist() == [0, 0, 1, 0, 0]  # [6, 8) still nests in [0, 10)


def test_refuses_models_and_missing_folders(mlp_profile: ProfileResult, tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(ortlab.examples.path("mlp").read_bytes())
    before = model.read_bytes()
    with pytest.raises(ValueError, match="onnx"):
        mlp_profile.to_perfetto(model)
    copy = tmp_path / "model.bin"
    copy.write_bytes(before)
    with pytest.raises(ValueError, match="overwrite the model"):
        mlp_profile.to_perfetto(copy, model=copy)
    assert model.read_bytes() == before and copy.read_bytes() == before
    with pytest.raises(FileNotFoundError):
        mlp_profile.to_perfetto(tmp_path / "no" / "t.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "model.bin"]


def test_cli_writes_the_trace_and_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "trace.json"
    assert main(["profile", "mlp", "--runs", "2", "--warmup", "1", "--perfetto", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"Perfetto trace written to {out}" in text and "By op type" in text
    doc = _load(out)
    assert _slices(doc) and all(e["args"]["name_from"] == "placement join" for e in _slices(doc))
    assert main(["profile", "mlp", "--runs", "2", "--json", "--perfetto", str(out)]) == 0
    cap = capsys.readouterr()
    assert ProfileResult.from_json(cap.out).runs == 2 and str(out) in cap.err
    assert msgspec.json.decode(out.read_bytes())["metadata"]["runs"] == 2
