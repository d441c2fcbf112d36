"""Hostile and broken inputs (issue 8): each case names its ortlab error and the message text
that says what failed or how to fix it. Cases that must *work* (unnamed nodes, control flow,
string/bool inputs, an older or 200 MB profile) assert that they do.

A module fixture checks, after all cases, that a good model still loads and runs: no case may
leave the worker or the cache broken.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlab
from ortlab.analysis.graph.data import graph_data
from ortlab.analysis.graph.mapping import graph_nodes
from ortlab.core.config import SessionConfig
from ortlab.core.errors import (
    ExternalDataError,
    FeedError,
    InvalidModelError,
    OrtlabWarning,
    ProfileParseError,
    ProviderError,
    ProviderFallbackWarning,
    SessionConfigError,
    SessionCreationError,
    UnsupportedModelError,
)
from tests import models

F = TensorProto.FLOAT
GOLDEN = Path(__file__).parent / "data" / "profiles" / "ort-1.31.1_mlp_cpu_4runs.json"


@pytest.fixture(scope="module", autouse=True)
def _good_model_still_runs() -> Iterator[None]:
    """After every bad input of this module, a good model loads and runs in the same worker."""
    yield
    result = ortlab.benchmark(ortlab.examples.mlp(), runs=2, warmup=1, progress=False)
    assert result.stats.count == 2
    assert result.report is not None and result.report.active == ["CPUExecutionProvider"]


def _run(model: Any, **kwargs: Any) -> ortlab.BenchmarkResult:
    return ortlab.benchmark(model, runs=1, warmup=0, progress=False, **kwargs)


# ------------------------------------------------------------------ files that are not models


def _zip_bytes(tmp_path: Path) -> bytes:
    path = tmp_path / "checkpoint.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", b"x" * 100)
    return path.read_bytes()


FILES: dict[str, tuple[Callable[[Path], bytes], str]] = {
    "empty": (lambda _: b"", r"is empty \(0 bytes\): not an ONNX model"),
    "random-bytes": (
        lambda _: np.random.default_rng(8).bytes(4096),
        r"protobuf parsing failed \(4096 bytes\).*Re-download or re-export",
    ),
    "zip": (_zip_bytes, "zip archive.*torch.onnx.export"),
    "hdf5": (lambda _: b"\x89HDF\r\n\x1a\n" + b"\0" * 64, "HDF5 file .Keras.., not an ONNX"),
    "tflite": (lambda _: b"\x1c\0\0\0TFL3" + b"\0" * 64, "TensorFlow Lite model, not an ONNX"),
    "truncated-protobuf": (
        lambda _: ortlab.examples.conv_bn_relu().SerializeToString()[:5000],
        "protobuf parsing failed.*truncated",
    ),
    "text": (lambda _: b"this is a text file, not a model\n" * 20, "protobuf parsing failed"),
    "tensorproto": (
        lambda _: numpy_helper.from_array(np.ones(3, np.float32), "t").SerializeToString(),
        "protobuf parsing failed.*not an ONNX file at all",
    ),
    "non-utf8-name": (
        lambda _: models.add(["batch", 3]).SerializeToString().replace(b"batch", b"\x80atch"),
        "is damaged: the name or a dim name of value 'x' in the main graph is not valid UTF-8",
    ),
    "graphproto": (
        lambda _: models.add().graph.SerializeToString(),
        "parsed as protobuf but is not an ONNX model: it has no ir_version.*TensorProto",
    ),
}


@pytest.mark.parametrize("case", list(FILES))
def test_files_that_are_not_models(tmp_path: Path, case: str) -> None:
    make, message = FILES[case]
    path = tmp_path / f"{case}.onnx"
    path.write_bytes(make(tmp_path))
    with pytest.raises(InvalidModelError, match=message):
        ortlab.load(path)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "the bytes given are empty: not an ONNX model"),
        (b"\xff\xfe" * 999, "the bytes given is not a valid ONNX model: protobuf parsing"),
        (models.add().graph.SerializeToString(), "parsed as protobuf but is not an ONNX model"),
    ],
    ids=["empty", "garbage", "graphproto"],
)
def test_bytes_that_are_not_models(data: bytes, message: str) -> None:
    with pytest.raises(InvalidModelError, match=message):
        ortlab.load(data)


def test_model_without_a_graph() -> None:
    proto = onnx.ModelProto(ir_version=8)
    proto.opset_import.add(domain="", version=17)
    with pytest.raises(InvalidModelError, match="not an ONNX model: it has no graph"):
        ortlab.load(proto)


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("missing", r"does not exist\. Check the path, or use ortlab.examples.names\(\)"),
        ("folder", "is a folder, and neither an onnxruntime-genai folder"),
        ("nul", "Cannot read the model file .*: the path contains a NUL byte. Check the path"),
        ("too-long", "Cannot read the model file .*File name too long. Check the path"),
    ],
)
def test_paths_that_are_not_model_files(tmp_path: Path, where: str, message: str) -> None:
    path = {
        "missing": tmp_path / "nope.onnx",
        "folder": tmp_path,
        "nul": tmp_path / "mo\0del.onnx",
        "too-long": tmp_path / ("m" * 300 + ".onnx"),
    }[where]
    with pytest.raises(InvalidModelError, match=message):
        ortlab.load(path)


# ------------------------------------------------------------------ models ORT cannot run


@pytest.mark.parametrize(
    ("proto", "message"),
    [
        (models.ir_too_new(30), "IR version 30 is newer than this onnxruntime.*upgrade"),
        (models.opset_too_new(40), "ai.onnx opset 40 is newer.*convert_version"),
        (models.custom_domain(), "'FancyOp' from custom domain 'com.example.ops'.*custom_op_lib"),
    ],
    ids=["ir-too-new", "opset-too-new", "custom-domain"],
)
def test_models_this_ort_cannot_run(proto: onnx.ModelProto, message: str) -> None:
    model = ortlab.load(proto)  # a model ORT cannot run still loads, for inspection
    assert any(re.search(message, p) for p in model.summary.problems)
    assert "WARNING" in model.summary.to_text()
    with pytest.raises(UnsupportedModelError, match="cannot run on this onnxruntime: .*" + message):
        _run(model)


# ------------------------------------------------------------------ external data


def _external(folder: Path, location: str = "weights.bin", **entries: str) -> Path:
    """tests.models.external_data with some external_data entries overwritten or added."""
    path = models.external_data(folder, location=location, write=location == "weights.bin")
    proto = onnx.load(str(path), load_external_data=False)
    tensor = proto.graph.initializer[0]
    for entry in tensor.external_data:
        entry.value = entries.pop(entry.key, entry.value)
    for key, value in entries.items():
        tensor.external_data.add(key=key, value=value)
    path.write_bytes(proto.SerializeToString())
    return path


def _ext_symlink_outside(tmp_path: Path) -> Path:
    (tmp_path / "outside.bin").write_bytes(b"\0" * 64)
    path = _external(tmp_path / "m", location="link.bin")
    (tmp_path / "m" / "link.bin").symlink_to(tmp_path / "outside.bin")
    return path


def _ext_symlink_loop(tmp_path: Path) -> Path:
    path = _external(tmp_path / "m", location="loop.bin")
    (tmp_path / "m" / "loop.bin").symlink_to(tmp_path / "m" / "loop.bin")
    return path


def _ext_folder(tmp_path: Path) -> Path:
    path = _external(tmp_path / "m", location="data")
    (tmp_path / "m" / "data").mkdir()
    return path


def _ext_truncated(tmp_path: Path) -> Path:
    path = _external(tmp_path / "m")
    (tmp_path / "m" / "weights.bin").write_bytes(b"\0" * 8)
    return path


EXTERNAL: dict[str, tuple[Callable[[Path], Path], str]] = {
    "missing-file": (
        lambda t: _external(t / "m", location="gone.bin"),
        "Missing external data: tensor 'w' refers to external data 'gone.bin'.*Copy the data",
    ),
    "dotdot-etc-passwd": (
        lambda t: _external(t / "m", location="../../etc/passwd"),
        "Refusing to load.*'../../etc/passwd'.*outside the model's folder",
    ),
    "absolute-path": (
        lambda t: _external(t / "m", location="/etc/hostname"),
        "Refusing to load.*'/etc/hostname', an absolute or empty path",
    ),
    "symlink-outside": (_ext_symlink_outside, "'link.bin', which resolves to .*outside the model"),
    "symlink-loop": (_ext_symlink_loop, "Unusable external data path: .*'loop.bin': Symlink loop"),
    "location-is-a-folder": (_ext_folder, "'data', but .* is a folder, not a data file"),
    "nul-in-location": (
        lambda t: _external(t / "m", location="we\0ights.bin"),
        "Unusable external data path.*NUL byte.*re-export it",
    ),
    "truncated-data": (_ext_truncated, "Truncated external data.*has only 8 bytes"),
    "offset-not-a-number": (
        lambda t: _external(t / "m", offset="abc"),
        "Corrupt external data reference.*offset='abc', which is not a byte count",
    ),
    "offset-unicode-digit": (
        lambda t: _external(t / "m", offset="\u00b2"),
        "Corrupt external data reference.*offset='\u00b2', which is not a byte count",
    ),
    "negative-length": (
        lambda t: _external(t / "m", length="-24"),
        "Corrupt external data reference.*length='-24'.*re-export it",
    ),
}


@pytest.mark.parametrize("case", list(EXTERNAL))
def test_bad_external_data(tmp_path: Path, case: str) -> None:
    make, message = EXTERNAL[case]
    path = make(tmp_path)
    with pytest.raises(ExternalDataError, match=message):
        ortlab.load(path)


# ------------------------------------------------------------------ inputs and feeds


def test_negative_declared_dim() -> None:
    model = ortlab.load(models.add([2, -3]))
    with pytest.raises(FeedError, match=r"declares a negative dim \(-3\) on axis 1.*pass feeds"):
        _run(model)


def test_absurd_fixed_dims_are_refused_before_allocating() -> None:
    model = ortlab.load(models.add([2**40, 2]))
    with pytest.raises(FeedError, match=r"too large to synthesize.*dims are fixed.*feeds yours"):
        _run(model)


def test_absurd_symbolic_dims_are_refused_before_allocating() -> None:
    """3e8 float32 elements: numpy's float64 temporary alone would be 2.4 GB (2**31 elements
    used to pass the check and get the process OOM-killed)."""
    model = ortlab.load(models.add(["a", "b"]))
    with pytest.raises(FeedError, match=r"too large to synthesize.*dims=\{'a': 1\}"):
        model.example_inputs(dims={"a": 20_000, "b": 15_000})
    with pytest.raises(FeedError, match=r"dims\['a'\]=-1 is not a usable size"):
        model.example_inputs(dims={"a": -1})


@pytest.mark.parametrize(
    ("elem", "check"),
    [
        (TensorProto.STRING, lambda x: x.dtype == object and (x == "ortlab").all()),
        (TensorProto.BOOL, lambda x: x.dtype == bool),
    ],
    ids=["string", "bool"],
)
def test_string_and_bool_inputs_are_synthesized(elem: int, check: Callable[..., bool]) -> None:
    model = ortlab.load(models.identity(elem))
    feeds = model.example_inputs(dims={"batch": 2})
    assert feeds["x"].shape == (2, 4) and check(feeds["x"])
    assert _run(model, dims={"batch": 2}).stats.count == 1


def test_undefined_input_type_is_explained() -> None:
    proto = models.identity(TensorProto.FLOAT)
    proto.graph.input[0].type.tensor_type.elem_type = TensorProto.UNDEFINED
    with pytest.raises(FeedError, match="'x' of 'g' declares element type UNDEFINED.*feeds for"):
        ortlab.load(proto).example_inputs()


def test_sequence_input_is_explained() -> None:
    seq = helper.make_tensor_sequence_value_info("x", F, [2])
    proto = models.make(
        [helper.make_node("SequenceLength", ["x"], ["y"])],
        [seq],
        [models.vi("y", TensorProto.INT64, [])],
    )
    with pytest.raises(FeedError, match="'x' of 'g' is a sequence, not a tensor.*Pass feeds"):
        _run(proto)


@pytest.mark.parametrize(
    ("feeds", "message"),
    [
        (
            {"x": np.zeros((2, 3), np.int32)},
            r"'x': dtype int32, expected float.*astype\(np.float32",
        ),
        ({"x": np.zeros((2, 3, 1), np.float32)}, r"'x': rank 3 \[2, 3, 1\], expected rank 2"),
        ({"y": np.zeros((2, 3), np.float32)}, r"missing \['x'\].*unknown \['y'\]"),
    ],
    ids=["wrong-dtype", "wrong-rank", "wrong-name"],
)
def test_feeds_that_do_not_match(feeds: dict[str, np.ndarray], message: str) -> None:
    with pytest.raises(FeedError, match="(?s)" + message + r".*The model takes: x: float\[2, 3\]"):
        _run(models.add(), feeds=feeds)


# ------------------------------------------------------------------ graph structure


def _two_nodes(first: str, second: str) -> onnx.ModelProto:
    return models.make(
        [
            helper.make_node("Relu", ["x"], ["a"], name=first),
            helper.make_node("Neg", ["a"], ["y"], name=second),
        ],
        [models.vi("x")],
        [models.vi("y")],
    )


def _dup_in_subgraph() -> onnx.ModelProto:
    proto = models.with_if()
    else_branch = next(a.g for a in proto.graph.node[2].attribute if a.name == "else_branch")
    else_branch.node[1].name = "else_neg"
    return proto


def _dup_output() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Relu", ["x"], ["y"], name="a"),
        helper.make_node("Neg", ["x"], ["y"], name="b"),
    ]
    return models.make(nodes, [models.vi("x")], [models.vi("y")])


def _cycle() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
        helper.make_node("Neg", ["a"], ["b"], name="n2"),
        helper.make_node("Identity", ["a"], ["y"], name="n3"),
    ]
    return models.make(nodes, [models.vi("x")], [models.vi("y")])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: _two_nodes("n", "n"), "Node name 'n' is used by 2 nodes in the main graph.*uniq"),
        (_dup_in_subgraph, "'else_neg' is used by 2 nodes in the 'else' body of If node 'if'"),
        (_dup_output, "Tensor 'y' is the output of two nodes.*Rename one of the outputs"),
        (_cycle, r"form a cycle \('n2' -> 'n1' -> back to the first\).*fix that edge"),
    ],
    ids=["duplicate-node-names", "duplicate-in-subgraph", "duplicate-output", "cycle"],
)
def test_malformed_graphs(make: Callable[[], onnx.ModelProto], message: str) -> None:
    import onnxruntime as ort

    with pytest.raises(Exception, match="invalid model"):  # what ORT itself says of them
        ort.InferenceSession(make().SerializeToString(), providers=["CPUExecutionProvider"])
    model = ortlab.load(make())  # inspectable: the summary lists the defect
    assert model.summary.problems and graph_data(model).nodes
    for _ in range(2):  # the defects are found once per Model: every call still refuses it
        with pytest.raises(
            InvalidModelError, match="is malformed and ORT would refuse it: .*" + message
        ):
            _run(model)


def test_unnamed_nodes_work_and_are_keyed_sensibly() -> None:
    """ORT and ortlab both name unnamed nodes ``<op_type>_<index>``: the tables agree."""
    model = ortlab.load(_two_nodes("", ""))
    assert model.summary.problems == []
    cfg = ortlab.SessionConfig(level="disabled")
    placed = ortlab.placement(model, cfg, runs=2, warmup=0, progress=False)
    prof = ortlab.profile(model, cfg, runs=2, warmup=0, progress=False)
    assert placed.nodes["node"].tolist() == ["Relu_0", "Neg_1"]
    assert set(prof.by_node()["node"]) == {"Relu_0", "Neg_1"}
    assert (placed.nodes["time_source"] == "measured").all()
    assert [n.name for n in graph_data(model, placement=placed).nodes] == ["Relu_0", "Neg_1"]


# ------------------------------------------------------------------ control flow


def _loop() -> onnx.ModelProto:
    vi = models.vi
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_id"),
            helper.make_node("Add", ["v_in", "one_b"], ["v_out"], name="body_add"),
        ],
        "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("v_in")],
        [vi("cond_out", TensorProto.BOOL, []), vi("v_out")],
        initializer=[numpy_helper.from_array(np.ones(1, np.float32), "one_b")],
    )
    inits = [
        numpy_helper.from_array(np.array(3, np.int64), "trip"),
        numpy_helper.from_array(np.array(True), "cond"),
    ]
    node = helper.make_node("Loop", ["trip", "cond", "x"], ["y"], name="loop", body=body)
    return models.make([node], [vi("x")], [vi("y")], inits)


def _scan() -> onnx.ModelProto:
    vi = models.vi
    body = helper.make_graph(
        [
            helper.make_node("Add", ["acc_in", "row"], ["acc_out"], name="scan_add"),
            helper.make_node("Identity", ["acc_out"], ["row_out"], name="scan_id"),
        ],
        "scan_body",
        [vi("acc_in", F, [3]), vi("row", F, [3])],
        [vi("acc_out", F, [3]), vi("row_out", F, [3])],
    )
    zero = numpy_helper.from_array(np.zeros(3, np.float32), "zero")
    scan = helper.make_node(
        "Scan", ["zero", "x"], ["total", "rows"], name="scan", body=body, num_scan_inputs=1
    )
    relu = helper.make_node("Relu", ["total"], ["y"], name="relu")
    return models.make([scan, relu], [vi("x")], [vi("y", F, [3]), vi("rows")], [zero])


@pytest.mark.parametrize(
    ("make", "op"),
    [(models.with_if, "If"), (_loop, "Loop"), (_scan, "Scan")],
    ids=["if", "loop", "scan"],
)
def test_control_flow_goes_through_every_verb(make: Callable[[], onnx.ModelProto], op: str) -> None:
    onnx.checker.check_model(make(), full_check=True)
    model = ortlab.load(make(), name=op.lower())
    s = model.summary
    assert s.subgraph_count >= 1 and s.node_count_total > s.node_count and s.problems == []
    assert op in s.to_text() and "<table" in s._repr_html_()
    assert _run(model).stats.count == 1
    prof = ortlab.profile(model, runs=2, warmup=1, progress=False)
    assert op in set(prof.by_node()["op_type"]) and "by op type" in prof.to_text().lower()
    placed = ortlab.placement(model, runs=2, warmup=1, progress=False)
    every = graph_nodes(make().graph, subgraphs=True)  # body nodes have rows of their own
    assert len(every) > len(make().graph.node)
    assert set(placed.nodes["node"]) == {n.name for n in every}
    ran = placed.nodes[placed.nodes["partition"] >= 0]
    assert (ran["provider"] == "CPUExecutionProvider").all()
    assert placed.nodes["share"].sum() == pytest.approx(1.0, abs=0.02)  # bodies not twice
    opt = ortlab.optimization_diff(model, levels=["disabled", "all"], measure=False, progress=False)
    assert opt.counts.loc["all", op] == 1 and opt.to_text()
    view = graph_data(model, placement=placed)
    assert [n.op_type for n in view.nodes] == [n.op_type for n in every]
    bodies = {n.group for n in view.nodes if n.name not in {x.name for x in make().graph.node}}
    assert bodies and all(f"{op.lower()} ▸ " in g.lower() for g in bodies)  # opened in place


@pytest.mark.parametrize("make", [models.with_if, _loop, _scan], ids=["if", "loop", "scan"])
def test_graph_view_of_a_control_flow_profile(make: Callable[[], onnx.ModelProto]) -> None:
    model = ortlab.load(make())
    prof = ortlab.profile(model, runs=2, warmup=1, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrtlabWarning)  # every profiled node found on the graph
        view = graph_data(model, profile=prof)
    # each node the profile timed carries its time per run, bodies' nodes included: the graph's
    # total is the profile's own
    per_run = prof.by_node().set_index("node")["self_us"] / max(prof.runs, 1)
    shown = {n.name: n.us_per_run for n in view.nodes if n.name in per_run.index}
    assert view.has_time and shown == pytest.approx(per_run.to_dict())


# ------------------------------------------------------------------ profiles


def _old_format() -> bytes:
    """What older ORT wrote: a traceEvents wrapper, fence events, numbers as strings."""
    out = []
    for e in json.loads(GOLDEN.read_text()):
        out.append(dict(e, ts=str(e["ts"]), dur=str(e["dur"])))
        if e["cat"] == "Node":
            base = e["name"].removesuffix("_kernel_time")
            out += [dict(e, name=base + s, dur="0") for s in ("_fence_before", "_fence_after")]
    return json.dumps({"traceEvents": out[::-1]}).encode()


PROFILES: dict[str, tuple[bytes, str]] = {
    "empty": (b"  \n", "The profile is empty: ORT writes it only on end_profiling"),
    "truncated": (GOLDEN.read_bytes()[:3000], r"truncated \(3,000 bytes.*profile again"),
    "not-json": (b"<html>nope</html>", "Not an ORT profile: JSON is malformed"),
    "wrong-json": (b'{"traceEvents": 5}', "Not an ORT profile: Expected `array`"),
    "bad-number": (b'[{"name": "a", "ts": "soon"}]', r"Not an ORT profile: .*\$\[0\].ts"),
    "not-utf8": (b'[{"name": "\xff\xfe"}]', "a string in it is not valid UTF-8"),
    "utf16": ('[{"name": "a"}]'.encode("utf-16"), "UTF-16 text .*re-save this one as UTF-8"),
}


@pytest.mark.parametrize("case", list(PROFILES))
def test_bad_profiles(case: str) -> None:
    data, message = PROFILES[case]
    with pytest.raises(ProfileParseError, match=message):
        ortlab.parse_profile(data)


@pytest.mark.parametrize("where", ["missing", "folder"])
def test_profile_paths_that_are_not_files(tmp_path: Path, where: str) -> None:
    path = tmp_path / "none.json" if where == "missing" else tmp_path
    with pytest.raises(ProfileParseError, match="Cannot read profile .*(No such file|directory)"):
        ortlab.parse_profile_file(path)


@pytest.mark.parametrize(
    "data",
    [_old_format(), codecs.BOM_UTF8 + GOLDEN.read_bytes()],
    ids=["older-ort-format", "utf8-bom"],
)
def test_profiles_that_parse(data: bytes) -> None:
    new = ortlab.parse_profile_file(GOLDEN)
    got = ortlab.parse_profile(data)
    assert sorted(got.node) == sorted(new.node) and got.run_us == new.run_us
    assert sorted(got.ev_dur_us) == sorted(new.ev_dur_us)


def test_profile_without_node_events() -> None:
    """A trace of an all-constant-folded model has runs but no node events: empty tables."""
    runs = [{"cat": "Session", "name": "model_run", "ts": 10 * k, "dur": 5} for k in range(3)]
    result = ortlab.ProfileResult(
        model="m", config=SessionConfig(), data=ortlab.parse_profile(json.dumps(runs)), notes=["-"]
    )
    assert result.runs == 3
    for table in (result.by_node(), result.by_op_type(), result.by_provider()):
        assert table.empty
    assert "m" in result.to_text() and "<table" in result._repr_html_()


def test_profile_result_without_notes_renders() -> None:
    result = ortlab.ProfileResult(
        model="m", config=SessionConfig(), data=ortlab.parse_profile_file(GOLDEN)
    )
    assert "<table" in result._repr_html_()


def test_200_mb_profile(tmp_path: Path) -> None:
    """ORT's own events repeated to 200 MB (~100k runs): parsed, every run accounted for."""
    events = json.loads(GOLDEN.read_text())
    run = next(e for e in events if e["name"] == "model_run")
    block = [e for e in events if run["ts"] <= e["ts"] <= run["ts"] + run["dur"]]
    node_events = sum(1 for e in block if e["cat"] == "Node")
    pieces = [(json.dumps(dict(e, ts=0)).replace('"ts": 0', '"ts": %d'), e["ts"]) for e in block]
    template = ",\n".join(text for text, _ in pieces)
    offsets = [ts for _, ts in pieces]
    span = run["dur"] + 10
    path = tmp_path / "big.json"
    runs = size = 0
    with path.open("wb") as fh:
        fh.write(b"[\n")
        while size < 200 * 2**20:  # 1,000 runs per write
            chunk = ",\n".join(
                template % tuple(o + k * span for o in offsets) for k in range(runs, runs + 1000)
            )
            data = ((",\n" if runs else "") + chunk).encode()
            fh.write(data)
            size += len(data)
            runs += 1000
        fh.write(b"\n]\n")
    parsed = ortlab.parse_profile_file(path, skip_runs=1)
    assert path.stat().st_size >= 200 * 2**20
    assert len(parsed.run_us) == runs - 1 and parsed.skipped_runs == 1
    assert len(parsed.ev_node) == node_events * (runs - 1)
    assert len(parsed.node) == node_events
    assert parsed.events_total == len(block) * runs


# ------------------------------------------------------------------ session configs


def test_unknown_provider_name() -> None:
    with pytest.raises(ProviderError, match="Unknown execution provider 'nonsense'. Use a short"):
        ortlab.SessionConfig(providers=["nonsense"])
    with pytest.raises(ProviderError, match="Unknown execution provider 'nonsense'"):
        _run(models.add(), config={"providers": ["nonsense"]})


def test_unknown_full_provider_name_falls_back_with_a_warning() -> None:
    """A full name ortlab does not know passes through (a plugin EP), then the fallback says so."""
    with pytest.warns(ProviderFallbackWarning, match="'Nonsense'.*not part of this onnxrun"):
        result = _run(models.add(), config={"providers": ["NonsenseExecutionProvider"]})
    assert result.report is not None and result.report.active == ["CPUExecutionProvider"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"level": "turbo"}, "Unknown optimization level 'turbo'. Use one of disabled"),
        ({"intra_op_threads": -1}, "intra_op_threads=-1: give a thread count >= 0"),
        ({"fallback": "maybe"}, "fallback='maybe': use 'warn', 'error' or 'allow'"),
        ({"free_dimension_overrides": {"batch": 0}}, r"free_dimension_overrides\['batch'\]=0"),
    ],
    ids=["level", "threads", "fallback", "dim-override"],
)
def test_bad_config_values(fields: dict[str, object], message: str) -> None:
    with pytest.raises(SessionConfigError, match=message):
        _run(models.add(), config=fields)


def test_config_that_ort_refuses_in_the_worker_leaves_it_usable() -> None:
    """The cases above are refused by SessionConfig in the caller and never reach the worker;
    this one passes ortlab's checks and is refused by ORT itself, inside the worker: the error
    names ORT's complaint and the config, and the same worker process serves the next run."""
    from ortlab.engine.worker import get_worker

    _run(models.add())
    pid = get_worker().pid
    bad = {"config_entries": {"session.intra_op_thread_affinities": "zz"}, "intra_op_threads": 2}
    with pytest.raises(SessionCreationError, match=r"isdigit.*|could not create a session.*"):
        _run(models.add(), config=bad)
    assert get_worker().pid == pid, "the refusal came from a different (or no) worker"
    assert _run(models.add()).stats.count == 1


def test_unknown_config_key_in_json() -> None:
    with pytest.raises(SessionConfigError, match=r"Unknown SessionConfig fields \['bogus'\]; kn"):
        ortlab.SessionConfig.from_json('{"bogus": 1}')


def test_unknown_config_key_in_dict() -> None:
    with pytest.raises(SessionConfigError, match="Unknown SessionConfig fields"):
        _run(models.add(), config={"bogus": 1})


def test_missing_custom_op_library() -> None:
    with pytest.raises(SessionConfigError, match="libnope.so"):
        _run(models.custom_domain(), config={"custom_op_libraries": ["/nonexistent/libnope.so"]})


def test_cases_do_not_leak_files_into_the_working_directory(in_tmp_cwd: Path) -> None:
    for data in (b"", os.urandom(64)):
        with pytest.raises(InvalidModelError):
            ortlab.load(data)
    with pytest.raises(InvalidModelError):
        _run(_cycle())
    assert list(in_tmp_cwd.iterdir()) == []


def test_constant_nodes_may_share_a_name_as_onnxruntime_allows() -> None:
    """ORT turns Constant nodes into initializers before it checks node names: two Constants
    named alike load and run in plain onnxruntime, so ortlab must not call the model malformed
    (never stricter than ORT)."""
    import onnxruntime as ort

    value = helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])
    nodes = [
        helper.make_node("Constant", [], ["a"], name="k", value=value),
        helper.make_node("Constant", [], ["b"], name="k", value=value),
        helper.make_node("Add", ["a", "b"], ["c"], name="add"),
        helper.make_node("Add", ["x", "c"], ["y"], name="out"),
    ]
    proto = models.make(nodes, [models.vi("x", shape=[1])], [models.vi("y", shape=[1])])
    ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    model = ortlab.load(proto)
    assert model.summary.defects == []
    out = ortlab.benchmark(model, runs=2, warmup=0, progress=False)
    assert out.stats.count == 2
