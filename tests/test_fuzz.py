"""Property-based fuzzing (hypothesis) of the three parsers of untrusted input: the model loader,
the input synthesizer and the profile parser. Each either returns its result or raises an
OrtlabError; any other exception is a bug.

Counts are small so the file runs in well under a minute; ``ORTLAB_FUZZ_EXAMPLES=2000`` runs
every target that many times with fresh random seeds (benchmarks/results/fuzz.md has the figures
of such a run). The default run is derandomized: CI sees the same examples every time.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import ortlab
from ortlab.analysis.profiling import ProfileData, ProfileResult
from ortlab.core.config import SessionConfig
from ortlab.core.errors import FeedError, OrtlabError, OrtlabWarning, ProfileParseError
from ortlab.core.feedcheck import validate_feeds
from ortlab.core.inputs import positional_guesses
from tests import models

LONG = int(os.environ.get("ORTLAB_FUZZ_EXAMPLES", "0"))
GOLDEN = Path(__file__).parent / "data" / "profiles" / "ort-1.31.1_mlp_cpu_4runs.json"


def fuzz(default: int) -> Any:
    """``@settings`` for one target: ``default`` examples, or ORTLAB_FUZZ_EXAMPLES of them."""
    return settings(
        max_examples=LONG or default,
        deadline=None,
        database=None,  # nothing written to the working tree
        derandomize=not LONG,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@pytest.fixture(scope="module", autouse=True)
def _light_fuzzing() -> Iterator[None]:
    """Generated shapes can be huge: cap synthesized feeds at 16 MiB so the fuzz stays light
    (the same check as the 2 GiB default, just sooner). The cache's pruning is rate-limited
    (cache.PRUNE_EVERY_S) since a long run here found it quadratic when it ran on every write."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ortlab.core.inputs, "SYNTH_LIMIT_BYTES", 16 << 20)
        yield


# ------------------------------------------------------------------ (a) the model loader


def _seed_models() -> list[bytes]:
    rich = models.identity(TensorProto.STRING)
    rich.metadata_props.add(key="author", value="fuzz")
    rich.graph.value_info.append(models.vi("t", TensorProto.INT64, ["batch", None, 3]))
    return [
        models.add(["batch", 3]).SerializeToString(),
        models.with_if().SerializeToString(),
        models.custom_domain().SerializeToString(),
        models.initializers_as_inputs(2).SerializeToString(),
        rich.SerializeToString(),
    ]


SEEDS = _seed_models()
with tempfile.TemporaryDirectory() as _folder:
    EXTERNAL_SEED = models.external_data(Path(_folder)).read_bytes()  # refers to weights.bin

_edit = st.tuples(
    st.sampled_from(["flip", "set", "truncate", "insert", "delete"]),
    st.integers(0, 1 << 16),
    st.binary(min_size=1, max_size=8),
)


@st.composite
def mutated_model(draw: st.DrawFn) -> bytes:
    """A seed model's bytes after 1-4 byte flips, overwrites, truncations, insertions, deletions."""
    data = draw(st.sampled_from([*SEEDS, EXTERNAL_SEED]))
    return _apply(data, draw(st.lists(_edit, min_size=1, max_size=4)))


def _apply(raw: bytes, edits: list[tuple[str, int, bytes]]) -> bytes:
    """Byte flips, overwrites, truncations, insertions and deletions, in order."""
    data = bytearray(raw)
    for op, where, blob in edits:
        pos = where % (len(data) + 1)
        if op == "flip" and data:
            data[pos % len(data)] ^= 1 << (blob[0] % 8)
        elif op == "set" and data:
            data[pos % len(data)] = blob[0]
        elif op == "truncate":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = blob
        else:
            del data[pos : pos + len(blob)]
    return bytes(data)


def _exercise(model: ortlab.Model) -> None:
    """What a user does right after loading: read the summary, synthesize feeds."""
    assert isinstance(model, ortlab.Model)
    repr(model)
    model.summary.to_text()
    model.summary._repr_html_()
    assert ortlab.ModelSummary.from_json(model.summary.to_json()) == model.summary
    try:
        model.check_runnable()
        model.example_inputs()
        event("then: runnable, feeds synthesized")
    except OrtlabError as err:
        event(f"then: {type(err).__name__}")


def _beside_weights(tmp_path_factory: pytest.TempPathFactory, prefix: str, data: bytes) -> Path:
    """``model.onnx`` holding ``data``, in a new folder next to the external data file of
    EXTERNAL_SEED's folder layout."""
    folder = tmp_path_factory.mktemp(prefix)
    (folder / "weights.bin").write_bytes(np.arange(6, dtype=np.float32).tobytes())
    path = folder / "model.onnx"
    path.write_bytes(data)
    return path


def _load_and_exercise(source: Path | bytes | onnx.ModelProto) -> None:
    """Load ``source``: an ortlab error, or a Model every cheap verb then runs on."""
    try:
        model = ortlab.load(source)
    except OrtlabError as err:
        event(f"load: {type(err).__name__}")
        return
    event("load: Model")
    _exercise(model)


@fuzz(1000)
@given(data=mutated_model(), by_path=st.booleans())
def test_loader_on_mutated_bytes(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, by_path: bool
) -> None:
    _load_and_exercise(_beside_weights(tmp_path_factory, "m", data) if by_path else data)


_INT = st.one_of(st.integers(-3, 8), st.sampled_from([2**31, 2**40, 2**63 - 1, -(2**62)]))
_TEXT = st.one_of(
    st.sampled_from(["", "weights.bin", "../x", "/etc/hostname", "a\0b", "x" * 300, "."]),
    st.sampled_from(["0", "24", "-5", "1e3", "\u00b2", "\u0663", " 7", "9" * 30]),  # numbers?
    st.text(max_size=12),
)


@st.composite
def edited_model(draw: st.DrawFn) -> onnx.ModelProto:
    """A seed model with a few semantic edits a hostile or buggy exporter could make."""
    proto = onnx.ModelProto.FromString(draw(st.sampled_from([*SEEDS, EXTERNAL_SEED])))
    g = proto.graph
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["dim", "elem", "name", "wire", "external", "opset", "ir"]))
        values = [*g.input, *g.output, *g.value_info]
        if kind == "dim" and values:
            vi = draw(st.sampled_from(values))
            for d in vi.type.tensor_type.shape.dim:
                if draw(st.booleans()):
                    d.dim_value = draw(_INT)
                else:
                    d.dim_param = draw(st.sampled_from(["", "batch", "seq", "height", "n"]))
        elif kind == "elem" and values:
            vi = draw(st.sampled_from(values))
            vi.type.tensor_type.elem_type = draw(st.integers(0, 40))
        elif kind == "name" and g.node:
            draw(st.sampled_from(list(g.node))).name = draw(
                st.sampled_from(["", g.node[0].name, "n", "Relu_0"])
            )
        elif kind == "wire" and g.node:
            names = [t for n in g.node for t in [*n.input, *n.output]] + ["x", "missing"]
            node = draw(st.sampled_from(list(g.node)))
            if node.input:
                node.input[draw(st.integers(0, len(node.input) - 1))] = draw(st.sampled_from(names))
        elif kind == "external" and g.initializer:
            tensor = draw(st.sampled_from(list(g.initializer)))
            tensor.data_location = TensorProto.EXTERNAL
            key = draw(st.sampled_from(["location", "offset", "length", "checksum", "x"]))
            tensor.external_data.add(key=key, value=draw(_TEXT))
        elif kind == "opset":
            proto.opset_import.add(
                domain=draw(st.sampled_from(["", "ai.onnx.ml", "com.microsoft", "my.ops"])),
                version=draw(_INT),
            )
        elif kind == "ir":
            proto.ir_version = draw(_INT)
    return proto


@fuzz(400)
@given(proto=edited_model())
def test_loader_on_edited_models(
    tmp_path_factory: pytest.TempPathFactory, proto: onnx.ModelProto
) -> None:
    path = _beside_weights(tmp_path_factory, "e", proto.SerializeToString())
    for source in (path, proto):
        _load_and_exercise(source)


# ------------------------------------------------------------------ (b) the input synthesizer

_DTYPES = [v for _, v in TensorProto.DataType.items() if v]
_SYMBOLS = ["batch", "sequence", "n", "foo", "channels", "height", "past_len"]
_PLAIN_DIM = st.one_of(st.integers(1, 6), st.sampled_from(_SYMBOLS))


@st.composite
def graph_inputs(draw: st.DrawFn) -> tuple[onnx.ModelProto, dict[str, int] | None]:
    """1-4 inputs of any element type, rank 0-4, fixed or symbolic dims; integer inputs often
    index an embedding table through Gather; optional dims=. Half the examples are *hostile*:
    unknown element types, unranked or sequence inputs, unknown/0/negative/huge dims, dims=
    naming absent symbols or giving unusable sizes; the other half are plain, so that most
    examples also reach the synthesizer's happy path."""
    hostile = draw(st.booleans())
    dtype = st.sampled_from(_DTYPES)
    dim = _PLAIN_DIM
    if hostile:
        dtype = st.one_of(dtype, st.sampled_from([0, 99]))
        dim = st.one_of(dim, st.none(), st.sampled_from([0, -1, 2**31, 2**40]))
    inputs, outputs, nodes, inits = [], [], [], []
    for i in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["x", "input_ids", "attention_mask", "position_ids"]))
        name = f"{kind}{i}"
        elem = draw(dtype)
        shape = (
            None if hostile and draw(st.integers(0, 9)) == 9 else draw(st.lists(dim, max_size=4))
        )
        if hostile and draw(st.integers(0, 9)) == 9:
            inputs.append(helper.make_tensor_sequence_value_info(name, elem, shape))
        else:
            inputs.append(helper.make_tensor_value_info(name, elem, shape))
        if draw(st.booleans()):  # an embedding lookup; the axis may be out of range
            rows = draw(st.sampled_from([7, 0, 300]))
            table = numpy_helper.from_array(np.zeros((rows, 2), np.float32), f"table{i}")
            inits.append(table)
            axis = draw(st.sampled_from([0, 0, 1, -1, 5]))
            gather = helper.make_node("Gather", [table.name, name], [f"y{i}"], axis=axis)
            nodes.append(gather)
        else:
            nodes.append(helper.make_node("Identity", [name], [f"y{i}"], name=f"id{i}"))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.UNDEFINED, None))
    graph = helper.make_graph(nodes, "fuzz", inputs, outputs, initializer=inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    used = sorted({d for vi in inputs for d in _dim_params(vi)})
    keys = st.sampled_from(used) if used and not hostile else st.sampled_from(used + _SYMBOLS)
    values = st.integers(1, 64)
    if hostile:
        values = st.one_of(values, st.sampled_from([0, -2, 2**31 + 1]))
    dims = draw(st.one_of(st.none(), st.dictionaries(keys, values, max_size=3)))
    return proto, dims


def _dim_params(vi: onnx.ValueInfoProto) -> list[str]:
    kind = vi.type.WhichOneof("value")
    ttype = vi.type.sequence_type.elem_type.tensor_type if kind == "sequence_type" else None
    dims = (ttype or vi.type.tensor_type).shape.dim
    return [d.dim_param for d in dims if d.dim_param]


def _table_rows(proto: onnx.ModelProto, name: str) -> int:
    """The rows of the table a Gather indexes with input ``name`` (10 without one: the default
    range of synthesized integers)."""
    for node in proto.graph.node:
        if node.op_type == "Gather" and node.input[1] == name:
            table = next(t for t in proto.graph.initializer if t.name == node.input[0])
            axis = helper.get_attribute_value(node.attribute[0])
            if -2 <= axis < 2 and table.dims[axis] > 0:
                return int(table.dims[axis])
    return 10


@fuzz(400)
@given(case=graph_inputs(), seed=st.integers(0, 2**32 - 1))
def test_synthesizer_on_generated_graphs(
    case: tuple[onnx.ModelProto, dict[str, int] | None], seed: int
) -> None:
    proto, dims = case
    try:
        model = ortlab.load(proto)
    except OrtlabError:  # an input name used twice and the like: not the synthesizer's case
        event("load refused")
        return
    try:
        with warnings.catch_warnings():  # a dims= name the graph lacks: warned, then ignored
            warnings.simplefilter("ignore", OrtlabWarning)
            feeds = model.example_inputs(dims=dims, seed=seed)
    except FeedError:
        event("FeedError")
        return
    event("feeds")
    guessed = positional_guesses(model.signature)
    assert list(feeds) == [t.name for t in model.inputs]
    validate_feeds(model, feeds)  # dtype, rank, fixed dims and shared symbolic dims all agree
    for info in model.inputs:
        array = feeds[info.name]
        assert info.shape is not None and array.ndim == len(info.shape)
        for axis, (d, got) in enumerate(zip(info.shape, array.shape, strict=True)):
            expected = (
                d
                if isinstance(d, int)
                else feeds.dims[d].value
                if d
                else guessed.get((info.name, axis), (1, ""))[0]
            )
            assert got == expected
        if array.size and array.dtype.kind in "iu" and "position" not in info.name:
            assert array.min() >= 0 and array.max() < max(_table_rows(proto, info.name), 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrtlabWarning)
        again = model.example_inputs(dims=dims, seed=seed)  # seeded: the same feeds again
    for name, array in feeds.items():
        other = again[name]
        assert other.dtype == array.dtype and other.shape == array.shape
        same = (
            (other == array).all() if array.dtype == object else other.tobytes() == array.tobytes()
        )
        assert same


# ------------------------------------------------------------------ (c) the profile parser

_time = st.one_of(st.integers(0, 10**6), st.floats(0, 1e6))
_number = st.one_of(
    _time,
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from(["12", "1e3", "soon", "", None, True]),
)
_shape = st.lists(
    st.dictionaries(
        st.sampled_from(["float", "int64", "bool", ""]),
        st.one_of(
            st.lists(
                st.one_of(st.integers(-2, 2**33), st.booleans(), st.text(max_size=2)), max_size=4
            ),
            st.integers(),
            st.none(),
        ),
        max_size=2,
    ),
    max_size=3,
)
_args = st.one_of(
    st.none(),
    st.integers(),
    st.fixed_dictionaries(
        {},
        optional={
            "op_name": st.one_of(st.sampled_from(["Conv", "Gemm", ""]), st.integers()),
            "provider": st.one_of(st.sampled_from(["CPUExecutionProvider", "X"]), st.none()),
            "input_type_shape": st.one_of(_shape, st.text(max_size=4)),
            "output_type_shape": _shape,
            "node_index": st.text(max_size=3),
        },
    ),
)
_NAMES = [
    "a_kernel_time",
    "b_kernel_time",
    "model_run",
    "session_initialization",
    "model_loading_uri",
    "_kernel_time",
    "a_fence_before",
    "SequentialExecutor::Execute",
]
_fields = {
    "name": st.one_of(st.sampled_from(_NAMES), st.text(max_size=8), st.integers()),
    "cat": st.one_of(st.sampled_from(["Node", "Session", "Api"]), st.text(max_size=3)),
    "ph": st.just("X"),
    "ts": _number,
    "dur": _number,
    "args": _args,
}
# Events shaped like ORT's: every field present, names, categories and times as ORT writes them.
_ort_event = st.fixed_dictionaries(
    {
        "name": st.sampled_from(_NAMES),
        "cat": st.sampled_from(["Node", "Session", "Api"]),
        "ph": st.just("X"),
        "ts": _time,
        "dur": _time,
        "args": _args,
    }
)
# Anything: fields missing, of the wrong type, strings for numbers.
_any_event = st.fixed_dictionaries({}, optional=_fields)


@st.composite
def profile_text(draw: st.DrawFn) -> bytes:
    """A generated trace (a list, or wrapped in traceEvents), or ORT's own golden trace, then
    optionally a few byte edits."""
    source = draw(st.sampled_from(["generated", "wrapped", "golden"]))
    hostile = draw(st.booleans())  # half the traces: any event, and byte edits
    if source == "golden":
        events: Any = json.loads(GOLDEN.read_text())
        events = draw(st.permutations(events))[: draw(st.integers(0, len(events)))]
    else:
        event = st.one_of(_ort_event, _any_event) if hostile else _ort_event
        events = draw(st.lists(event, max_size=30))
    doc = {"traceEvents": events} if source == "wrapped" else events
    edits = draw(st.lists(_edit, min_size=1, max_size=3)) if hostile else []
    return _apply(json.dumps(doc).encode(), edits)


def _check_profile(data: ProfileData) -> None:
    n = len(data.node)
    assert len(data.op_type) == len(data.provider) == len(data.input_types) == n
    events = len(data.ev_node)
    assert len(data.ev_run) == len(data.ev_start_us) == len(data.ev_dur_us) == events
    assert all(0 <= k < n for k in data.ev_node)
    assert all(0 <= r < max(len(data.run_us), 1) for r in data.ev_run)
    assert events <= data.events_total
    result = ProfileResult(model="fuzz", config=SessionConfig(), data=data, notes=["fuzzed"])
    for table in (result.by_node(), result.by_op_type(), result.by_provider(), result.timeline(0)):
        assert table is not None
    result.to_text()
    result._repr_html_()
    repr(result)
    assert ProfileResult.from_json(result.to_json()).data == data


@pytest.mark.slow
@fuzz(400)
@given(data=profile_text(), skip=st.integers(0, 3), as_text=st.booleans())
def test_profile_parser_on_generated_traces(data: bytes, skip: int, as_text: bool) -> None:
    try:
        raw: bytes | str = data.decode("utf-8", "surrogateescape") if as_text else data
        parsed = ortlab.parse_profile(raw, skip_runs=skip)
    except ProfileParseError:
        event("ProfileParseError")
        return
    event(f"ProfileData{' with node events' if parsed.ev_node else ''}")
    assert isinstance(parsed, ProfileData)
    _check_profile(parsed)
