from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

import ortlab
from ortlab.analysis.profiling import ProfileResult, parse_profile, parse_profile_file
from ortlab.core.config import SessionConfig
from ortlab.core.errors import ProfileParseError

GOLDEN = Path(__file__).parent / "data" / "profiles" / "ort-1.31.1_mlp_cpu_4runs.json"
NODES = {
    "fused /layers.0/MatMul/MatMulAddFusion",
    "fused /layers.1/MatMul/MatMulAddFusion",
    "/layers.2/MatMul/MatMulAddFusion",
}


def test_golden_profile_ort_1_31() -> None:
    data = parse_profile_file(GOLDEN)
    assert set(data.node) == NODES
    assert set(data.op_type) == {"FusedGemm", "Gemm"}
    assert set(data.provider) == {"CPUExecutionProvider"}
    assert len(data.run_us) == 4
    assert len(data.ev_node) == 12
    assert data.session_init_us == 1458
    assert data.model_loading_us == 1801
    assert sorted(set(data.ev_run)) == [0, 1, 2, 3]
    assert all(s >= 0 for s in data.ev_start_us)
    k = data.node.index("/layers.2/MatMul/MatMulAddFusion")
    assert data.input_types[k][0] == ("float", (1, 512))
    assert data.output_types[k] == (("float", (1, 10)),)


def test_warmup_runs_are_skipped() -> None:
    data = parse_profile_file(GOLDEN, skip_runs=1)
    assert len(data.run_us) == 3 and len(data.ev_node) == 9
    assert data.skipped_runs == 1


def _old_style(events: list[dict]) -> bytes:
    """The shape older ORT versions wrote: traceEvents wrapper, fence events, string numbers,
    unsorted events."""
    out = []
    for original in events:
        e = dict(original, ts=str(original["ts"]), dur=str(original["dur"]))
        out.append(e)
        if e["cat"] == "Node":
            base = e["name"].removesuffix("_kernel_time")
            for suffix in ("_fence_before", "_fence_after"):
                out.append(
                    {
                        "cat": "Node",
                        "ph": "X",
                        "name": base + suffix,
                        "ts": e["ts"],
                        "dur": "0",
                        "args": {"op_name": e["args"]["op_name"]},
                    }
                )
    random.Random(0).shuffle(out)
    return json.dumps({"traceEvents": out}).encode()


def test_older_format_parses_the_same() -> None:
    events = json.loads(GOLDEN.read_text())
    new = parse_profile(GOLDEN.read_bytes())
    old = parse_profile(_old_style(events))
    assert sorted(old.node) == sorted(new.node)
    assert old.run_us == new.run_us
    assert sorted(zip(old.ev_run, old.ev_dur_us, strict=True)) == sorted(
        zip(new.ev_run, new.ev_dur_us, strict=True)
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "profile is empty"),
        (b'[{"cat": "Node", "name": "x_kernel_time", "ts": 1, "dur"', "truncated"),
        (b"<html>not json</html>", "Not an ORT profile"),
        (b'{"some": "object"}', "Not an ORT profile"),
    ],
    ids=["empty", "truncated", "not-json", "wrong-json"],
)
def test_bad_profiles_name_the_problem(content: bytes, message: str) -> None:
    with pytest.raises(ProfileParseError, match=message):
        parse_profile(content)


def test_missing_profile_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileParseError, match="Cannot read profile"):
        parse_profile_file(tmp_path / "none.json")


def test_compiled_subgraph_events_are_nodes() -> None:
    """OpenVINO/TensorRT report one event per compiled subgraph; keep it as a node."""
    events = [
        {"cat": "Session", "name": "model_run", "ph": "X", "ts": 100, "dur": 50, "args": {}},
        {
            "cat": "Node",
            "ph": "X",
            "ts": 105,
            "dur": 30,
            "name": "OpenVINOExecutionProvider_OpenVINO-EP-subgraph_1_0_kernel_time",
            "args": {"op_name": "OpenVINO-EP-subgraph_1", "provider": "OpenVINOExecutionProvider"},
        },
        {
            "cat": "Node",
            "ph": "X",
            "ts": 136,
            "dur": 10,
            "name": "isnan_kernel_time",
            "args": {"op_name": "IsNaN", "provider": "CPUExecutionProvider"},
        },
    ]
    data = parse_profile(json.dumps(events))
    assert data.op_type == ["OpenVINO-EP-subgraph_1", "IsNaN"]
    assert data.provider == ["OpenVINOExecutionProvider", "CPUExecutionProvider"]
    assert data.ev_start_us == [5.0, 36.0]


def _result() -> ProfileResult:
    return ProfileResult(
        model="mlp",
        config=SessionConfig(),
        data=parse_profile_file(GOLDEN),
        report=None,
        notes=["profiling on"],
    )


def test_nodes_rank_by_their_median_run_not_by_one_stalled_run() -> None:
    """A 57 µs-median node with one 5 ms stall must rank below a steady 230 µs node: totals
    rank them the other way. Every table, share and top-n list reads the median run."""
    events = []
    for run in range(5):
        t0 = run * 10_000
        events.append(
            {"cat": "Session", "ph": "X", "name": "model_run", "ts": t0, "dur": 6000, "args": {}}
        )
        stall = 5000 if run == 2 else 57
        for k, (name, dur) in enumerate([("steady", 230), ("stalls", stall)]):
            events.append(
                {
                    "cat": "Node",
                    "ph": "X",
                    "name": f"{name}_kernel_time",
                    "ts": t0 + 1 + k * 5100,
                    "dur": dur,
                    "args": {
                        "op_name": "Conv" if k == 0 else "Add",
                        "provider": "CPUExecutionProvider",
                    },
                }
            )
    p = ProfileResult(model="m", config=SessionConfig(), data=parse_profile(json.dumps(events)))
    nodes = p.by_node()
    assert nodes["node"].tolist() == ["steady", "stalls"]
    assert nodes["us_per_run"].tolist() == [230.0, 57.0]
    assert nodes["share"].tolist() == pytest.approx([230 / 287, 57 / 287])
    assert nodes["total_us"].tolist() == [1150.0, 5228.0]  # the totals say otherwise
    assert p.top_nodes(1)["node"].tolist() == ["steady"]
    ops = p.by_op_type()
    assert ops["op_type"].tolist() == ["Conv", "Add"]
    assert ops["share"].tolist() == pytest.approx([230 / 287, 57 / 287])


def test_tables_from_fixed_events() -> None:
    p = _result()
    nodes = p.by_node()
    memory = ["output", "activation", "parameter", "in_use", "peak", "arena"]
    assert list(nodes.columns) == [
        "node",
        "op_type",
        "provider",
        "us_per_run",
        "share",
        "calls",
        "median_us",
        "mean_us",
        "total_us",
        "self_us",
        "input_shapes",
        "output_shapes",
        *(f"{m}_bytes" for m in memory),
    ]
    assert (nodes["self_us"] == nodes["total_us"]).all()  # no control flow: self = total
    assert set(nodes["node"]) == NODES
    assert (nodes["calls"] == 4).all()
    assert nodes["share"].sum() == pytest.approx(1.0)
    assert nodes["us_per_run"].is_monotonic_decreasing
    ops = p.by_op_type()
    assert set(ops["op_type"]) == {"FusedGemm", "Gemm"}
    assert ops["nodes"].sum() == 3
    assert ops["share"].sum() == pytest.approx(1.0)
    prov = p.by_provider()
    assert prov["provider"].tolist() == ["CPUExecutionProvider"]
    assert prov["share"].iloc[0] == pytest.approx(1.0)
    tl = p.timeline(0)
    assert len(tl) == 3 and tl["start_us"].is_monotonic_increasing
    with pytest.raises(IndexError, match="this profile has 4 runs"):
        p.timeline(9)
    assert len(p.top_nodes(2)) == 2


def test_profile_result_json_round_trip() -> None:
    p = _result()
    again = ProfileResult.from_json(p.to_json())
    assert again == p
    assert again.by_node().equals(p.by_node())
    with pytest.raises(ortlab.OrtlabError, match="holds an ortlab 'ProfileResult'"):
        ortlab.BenchmarkResult.from_json(p.to_json())


@pytest.mark.parametrize("kind", ["op_type", "provider", "treemap", "top", "timeline"])
def test_plots_return_figures(kind: str) -> None:
    import plotly.graph_objects as go

    fig = _result().plot(kind)
    assert isinstance(fig, go.Figure)
    assert len(fig.data) >= 1
    assert "mlp" in fig.layout.title.text


def test_unknown_plot_kind() -> None:
    with pytest.raises(ValueError, match="choose from op_type"):
        _result().plot("pie")


def test_profile_end_to_end_leaves_no_files(mlp: ortlab.Model, in_tmp_cwd: Path) -> None:
    from ortlab.core import cache

    p = ortlab.profile(mlp, runs=5, warmup=2, progress=False)
    assert p.runs == 5
    assert set(p.data.ev_run) == set(range(5))
    assert p.report is not None and p.report.active == ["CPUExecutionProvider"]
    assert list(in_tmp_cwd.iterdir()) == []
    assert not list(cache.cache_dir().rglob("*profile*.json"))
    assert "by op type" in p.to_text().lower()
    assert "<table" in p._repr_html_()


@pytest.mark.slow
def test_profile_resnet50(resnet50: ortlab.Model) -> None:
    p = ortlab.profile(
        resnet50, ortlab.SessionConfig(level="all"), runs=3, warmup=1, progress=False
    )
    ops = p.by_op_type()
    assert ops.iloc[0]["op_type"] == "Conv", "convolutions dominate ResNet-50"
    assert p.data.session_init_us > 0
    assert np.isclose(p.by_node()["share"].sum(), 1.0)


def test_profile_bert_tiny_extended(bert_tiny: ortlab.Model) -> None:
    p = ortlab.profile(
        bert_tiny,
        ortlab.SessionConfig(level="extended"),
        runs=3,
        dims={"sequence": 16},
        progress=False,
    )
    ops = set(p.data.op_type)
    assert "LayerNormalization" in ops, "ORT fuses the LayerNorm pattern"
    assert any("Gelu" in o for o in ops), "and the Gelu pattern at extended"


def test_control_flow_bodies_are_not_counted_twice_in_shares() -> None:
    """A Loop's event already spans its body's node events: every node's share is of its
    *self* time (the Loop's without its body), so the shares of all nodes, body included, sum
    to 1, each table agrees, and self time adds up to the node time inside the profile's own
    runs (an independent total)."""
    from ortlab.analysis.profiling import nested_events
    from tests.test_bad_inputs import _loop

    p = ortlab.profile(
        ortlab.load(_loop()), {"level": "disabled"}, runs=3, warmup=1, progress=False
    )
    t = p.by_node().set_index("node")
    body = [n for n in t.index if n.startswith("body_")]
    assert body, t.index.tolist()  # ORT profiles the body's nodes too
    assert nested_events(p.data).sum() >= len(body) * p.runs
    assert t["share"].sum() == pytest.approx(1.0)
    assert p.by_op_type()["share"].sum() == pytest.approx(1.0)
    assert p.by_provider()["share"].sum() == pytest.approx(1.0)
    loop = t.loc["loop"]
    assert loop["self_us"] == pytest.approx(loop["total_us"] - t.loc[body, "total_us"].sum())
    assert t["self_us"].sum() <= sum(p.data.run_us) + 1e-6  # inside the measured runs


def test_node_coverage_agrees_with_the_raw_trace() -> None:
    """What the node table accounts for, read independently from the trace's own events: per
    run, its node events' durations over its model_run event; the median run's."""
    events = json.loads(GOLDEN.read_text())
    runs = sorted((e for e in events if e["name"] == "model_run"), key=lambda e: e["ts"])
    nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    med_run = float(np.median([r["dur"] for r in runs]))
    per_node: dict[str, list[float]] = {}
    for r in runs:
        inside = [e for e in nodes if r["ts"] <= e["ts"] <= r["ts"] + r["dur"]]
        for e in inside:
            per_node.setdefault(e["name"], []).append(e["dur"])
    node_sum = sum(float(np.median(v)) for v in per_node.values())
    p = ProfileResult(model="mlp", config=SessionConfig(), data=parse_profile_file(GOLDEN))
    assert p.median_run_ms == pytest.approx(med_run / 1e3)
    assert p.node_coverage == pytest.approx(node_sum / med_run)
    assert 0 < p.node_coverage <= 1
    assert f"{p.node_coverage:.0%}" in p.conditions


def test_a_profile_on_a_busy_machine_says_so(mlp: ortlab.Model) -> None:
    """Another process burning a core while ORT profiles: the profile records the load (the
    worker's counters, not ours) and every view of it warns that shares are inflated."""
    from tests.models import busy_core

    with busy_core():
        p = ortlab.profile(mlp, runs=2000, warmup=2, progress=False)
    assert p.data.other_cores is not None and p.data.other_cores > 0.5
    assert p.busy
    text, html = p.to_text(), p._repr_html_()
    assert "shares inflated" in text and "shares inflated" in html
    again = ProfileResult.from_json(p.to_json())
    assert again.data.other_cores == p.data.other_cores and again.busy


def test_every_verb_that_profiles_makes_the_same_profile_result(mlp: ortlab.Model) -> None:
    """ProfileResult has one maker (profiling.profile_result): the profile, the placement
    join's and the roofline's carry the same notes and inputs, so no view says a profile's
    conditions three ways."""
    p = ortlab.profile(mlp, runs=3, progress=False)
    pl = ortlab.placement(mlp, runs=3, progress=False).profile
    roof = ortlab.roofline(mlp, runs=3, progress=False).profile
    assert pl is not None and roof is not None
    assert p.notes == pl.notes == roof.notes and p.feeds == pl.feeds == roof.feeds
    assert p.synthetic == pl.synthetic == roof.synthetic is True


def _read_with_json(events: list[dict], skip: int) -> dict[str, list]:
    """The trace read independently, event by event with the json module: node events in
    file order, each with its node's and thread's first-appearance index and its run."""
    runs = sorted(
        (e["ts"], e["dur"]) for e in events if e["cat"] == "Session" and e["name"] == "model_run"
    )[skip:]
    nodes: dict[str, int] = {}
    threads: dict[object, int] = {}
    out: dict[str, list] = {k: [] for k in ("node", "run", "start", "dur", "thread")}
    out["op_type"], out["provider"] = [], []
    for e in events:
        if e["cat"] != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        if e["name"].removesuffix("_kernel_time") not in nodes:  # a node's first event's args
            out["op_type"].append(e["args"].get("op_name", "?"))
            out["provider"].append(e["args"].get("provider", "?"))
        node = nodes.setdefault(e["name"].removesuffix("_kernel_time"), len(nodes))
        thread = threads.setdefault(e["tid"], len(threads))
        before = [i for i, (start, _) in enumerate(runs) if start <= e["ts"]]
        if not before or e["ts"] > runs[before[-1]][0] + runs[before[-1]][1]:
            continue  # a warm-up run's event
        run = before[-1]
        for key, value in zip(
            ("node", "run", "start", "dur", "thread"),
            (node, run, e["ts"] - runs[run][0], e["dur"], thread),
            strict=True,
        ):
            out[key].append(value)
    out["names"], out["threads"] = list(nodes), [str(t) for t in threads]
    return out


@pytest.mark.parametrize("model", ["mlp", "genai_int4", "optimum_gpt2_merged"])
@pytest.mark.parametrize("mapped", [False, True], ids=["read", "memory-mapped"])
def test_event_columns_equal_the_trace_read_with_json(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mapped: bool,
    model: str,
) -> None:
    """A real trace (two intra-op threads, seven runs; of the MLP, and of a decode step of the
    decoders genai's builder and optimum exported, the merged GPT-2's nodes inside its If)
    parsed from its bytes, its text and its file (read, or memory-mapped as big traces are),
    gives exactly the node, run, start, duration
    and thread of every node event that the json module reads; the arrays every table reads
    are those lists, and a pickled ProfileData carries the lists only."""
    import pickle

    import onnxruntime as ort

    from ortlab.engine import trace

    if model == "mlp":
        m: ortlab.Model = request.getfixturevalue("mlp")
        feeds = dict(m.example_inputs())
    else:
        m = ortlab.load(Path(ortlab.__file__).parent / "decoders" / model)
        feeds = dict(m.example_inputs(prompt=1, past=8))
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.intra_op_num_threads = 2
    so.profile_file_prefix = str(tmp_path / "trace")
    sess = ort.InferenceSession(str(m.path), so, providers=["CPUExecutionProvider"])
    for _ in range(7):
        sess.run(None, feeds)
    path = Path(sess.end_profiling())
    if mapped:
        monkeypatch.setattr(trace, "MAP_FROM_BYTES", 0)
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # a BOM, as an editor saves
    for skip in (0, 2):
        want = _read_with_json(json.loads(path.read_text("utf-8-sig")), skip)
        for data in (parse_profile_file(path, skip), parse_profile(path.read_bytes(), skip)):
            assert data.node == want["names"] and data.threads == want["threads"]
            assert data.ev_node == want["node"] and data.ev_run == want["run"]
            assert data.ev_start_us == want["start"] and data.ev_dur_us == want["dur"]
            assert data.ev_thread == want["thread"]
            assert data.op_type == want["op_type"] and data.provider == want["provider"]
            assert len(data.run_us) == 7 - skip
            for column, values in zip(
                data.events,
                (data.ev_node, data.ev_run, data.ev_start_us, data.ev_dur_us),
                strict=True,
            ):
                assert column.tolist() == values and not column.flags.writeable
            again = pickle.loads(pickle.dumps(data))
            assert again == data and "events" not in again.__dict__
            assert again.events.node.tolist() == data.ev_node
