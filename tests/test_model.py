from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import ortlab
from ortlab.core.errors import ExternalDataError, InvalidModelError, UnsupportedModelError
from tests import models


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_load_from_path_bytes_proto_agree(tmp_path: Path) -> None:
    proto = models.add()
    path = tmp_path / "add.onnx"
    path.write_bytes(proto.SerializeToString())
    before = _listing(tmp_path)
    a = ortlab.load(path)
    b = ortlab.load(str(path))
    c = ortlab.load(path.read_bytes())
    d = ortlab.load(proto)
    for m in (a, b, c, d):
        assert m.summary.node_count == 1
        assert [t.name for t in m.inputs] == ["x"]
        assert m.summary.op_types == {"Add": 1}
    assert a.path == path and a.source == "path"
    assert c.source == "bytes" and c.path.parent != tmp_path
    assert d.source == "proto"
    assert _listing(tmp_path) == before, "loading must not write next to the model"


def test_load_does_not_modify_a_given_proto() -> None:
    proto = models.add()
    before = proto.SerializeToString()
    ortlab.load(proto)
    assert proto.SerializeToString() == before


def test_resnet50_summary(resnet50: ortlab.Model) -> None:
    s = resnet50.summary
    assert s.ir_version == 7
    assert s.opsets == {"": 9}
    assert s.node_count == 176
    assert s.op_types["Conv"] == 53 and s.op_types["BatchNormalization"] == 53
    assert s.initializer_count > 250 and s.initializer_bytes > 90e6
    assert [(t.name, t.dtype, t.shape) for t in s.inputs] == [
        ("gpu_0/data_0", "float", (1, 3, 224, 224))
    ]
    assert s.problems == []
    assert "resnet50" in repr(resnet50) and "176 nodes" in repr(resnet50)
    assert "<table" in resnet50._repr_html_()


def test_symbolic_dims_in_summary(bert_tiny: ortlab.Model) -> None:
    shapes = {t.name: t.shape for t in bert_tiny.inputs}
    assert shapes == {"input_ids": ("batch", "sequence"), "attention_mask": ("batch", "sequence")}
    assert bert_tiny.outputs[0].shape == ("batch", "sequence", 128)
    assert bert_tiny.summary.to_pandas().columns.tolist() == ["role", "name", "dtype", "shape"]


def test_control_flow_nodes_are_counted() -> None:
    m = ortlab.load(models.with_if())
    assert m.summary.node_count == 3
    assert m.summary.node_count_total == 6
    assert m.summary.subgraph_count == 2
    assert m.summary.op_types["Abs"] == 1 and m.summary.op_types["If"] == 1


def test_summary_json_round_trip(resnet50: ortlab.Model) -> None:
    again = ortlab.ModelSummary.from_json(resnet50.summary.to_json())
    assert again == resnet50.summary


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", r"is empty \(0 bytes\)"),
        (os.urandom(3000), "protobuf parsing failed"),
        (models.add().SerializeToString()[:40], "protobuf parsing failed"),
        (b"this is a text file, not a model\n" * 20, "protobuf parsing failed"),
    ],
    ids=["empty", "random", "truncated", "text"],
)
def test_unreadable_files_name_the_problem(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(InvalidModelError, match=message):
        ortlab.load(path)


def test_zip_file(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", b"x" * 100)
    with pytest.raises(InvalidModelError, match="zip archive.*torch.onnx.export"):
        ortlab.load(path)


def test_protobuf_that_is_not_a_model(tmp_path: Path) -> None:
    path = tmp_path / "tensor.pb"
    path.write_bytes(numpy_helper.from_array(np.ones(3, np.float32), "t").SerializeToString())
    with pytest.raises(InvalidModelError, match="not an ONNX model|protobuf parsing failed"):
        ortlab.load(path)


def test_missing_path_and_folder(tmp_path: Path) -> None:
    with pytest.raises(InvalidModelError, match="does not exist.*examples.names"):
        ortlab.load(tmp_path / "nope.onnx")
    with pytest.raises(InvalidModelError, match="is a folder"):
        ortlab.load(tmp_path)
    with pytest.raises(TypeError, match="takes a path, bytes or onnx.ModelProto"):
        ortlab.load(3.5)  # type: ignore[arg-type]


def test_model_without_opset() -> None:
    proto = models.add()
    del proto.opset_import[:]
    with pytest.raises(InvalidModelError, match="no opset_import"):
        ortlab.load(proto)


def test_external_data_loads(tmp_path: Path) -> None:
    path = models.external_data(tmp_path / "m")
    m = ortlab.load(path)
    assert m.summary.external_data_bytes == 24
    out = ortlab.benchmark(m, runs=2, warmup=0, progress=False)
    assert out.stats.count == 2


def test_external_data_missing(tmp_path: Path) -> None:
    path = models.external_data(tmp_path / "m", write=False)
    with pytest.raises(ExternalDataError, match="Missing external data.*weights.bin"):
        ortlab.load(path)


@pytest.mark.parametrize("location", ["../../etc/passwd", "../secret.bin"])
def test_external_data_escaping_folder_is_refused(tmp_path: Path, location: str) -> None:
    (tmp_path / "secret.bin").write_bytes(b"\0" * 64)
    path = models.external_data(tmp_path / "m", location=location, write=False)
    with pytest.raises(ExternalDataError, match="outside the model's folder"):
        ortlab.load(path)


def test_external_data_absolute_path_is_refused(tmp_path: Path) -> None:
    path = models.external_data(tmp_path / "m", location="/etc/hostname", write=False)
    with pytest.raises(ExternalDataError, match="absolute or empty path"):
        ortlab.load(path)


def test_external_data_symlink_escaping_is_refused(tmp_path: Path) -> None:
    (tmp_path / "outside.bin").write_bytes(b"\0" * 64)
    folder = tmp_path / "m"
    path = models.external_data(folder, location="link.bin", write=False)
    (folder / "link.bin").symlink_to(tmp_path / "outside.bin")
    with pytest.raises(ExternalDataError, match="outside the model's folder"):
        ortlab.load(path)


def test_external_data_truncated(tmp_path: Path) -> None:
    path = models.external_data(tmp_path / "m")
    (tmp_path / "m" / "weights.bin").write_bytes(b"\0" * 8)
    with pytest.raises(ExternalDataError, match="Truncated external data"):
        ortlab.load(path)


def test_external_data_from_bytes_is_refused(tmp_path: Path) -> None:
    path = models.external_data(tmp_path / "m")
    with pytest.raises(ExternalDataError, match="Load it by path"):
        ortlab.load(path.read_bytes())


def test_model_over_2gb_loads_by_path(tmp_path: Path) -> None:
    """A 2.5 GB external weight (a sparse file: nothing is written) loads by path."""
    folder = tmp_path / "big"
    path = models.external_data(folder, location="big.bin", write=False)
    proto = onnx.load(str(path), load_external_data=False)
    size = 2_500_000_000
    tensor = proto.graph.initializer[0]
    del tensor.dims[:]
    tensor.dims.extend([size // 4])
    for entry in tensor.external_data:
        if entry.key == "length":
            entry.value = str(size)
    path.write_bytes(proto.SerializeToString())
    with (folder / "big.bin").open("wb") as fh:
        fh.truncate(size)
    m = ortlab.load(path)
    assert m.summary.external_data_bytes == size
    assert "2.3 GB" in m.summary.to_text()


def test_problems_for_models_this_ort_cannot_run() -> None:
    new_opset = ortlab.load(models.opset_too_new())
    assert any("opset 40 is newer" in p for p in new_opset.summary.problems)
    new_ir = ortlab.load(models.ir_too_new())
    assert any("IR version 30 is newer" in p for p in new_ir.summary.problems)
    custom = ortlab.load(models.custom_domain())
    assert any("custom domain 'com.example.ops'" in p for p in custom.summary.problems)
    assert "custom_op_libraries" in custom.summary.problems[0]
    with pytest.raises(UnsupportedModelError, match="opset 40 is newer.*convert_version"):
        ortlab.benchmark(new_opset, runs=1, progress=False)
    with pytest.raises(UnsupportedModelError, match="FancyOp"):
        ortlab.benchmark(custom, runs=1, progress=False)
    assert "WARNING" in custom.summary.to_text()


def test_initializers_as_inputs_are_flagged() -> None:
    m = ortlab.load(models.initializers_as_inputs())
    assert m.summary.initializers_as_inputs == 5
    assert [t.name for t in m.inputs] == ["x"], "initializers are not user inputs"
    assert "will not fold or fuse" in m.summary.to_text()


def test_examples_names_and_errors() -> None:
    names = ortlab.examples.names()
    for expected in (
        "resnet50",
        "densenet121",
        "inception_v2",
        "shufflenet",
        "squeezenet",
        "conv_bn_relu",
        "mlp",
        "bert_tiny",
    ):
        assert expected in names
    with pytest.raises(InvalidModelError, match="No bundled example named 'vgg'.*resnet50"):
        ortlab.examples.load("vgg")


def test_examples_are_cached_and_seeded() -> None:
    first = ortlab.examples.path("squeezenet")
    mtime = first.stat().st_mtime_ns
    assert ortlab.examples.path("squeezenet").stat().st_mtime_ns == mtime
    other = ortlab.examples.path("squeezenet", seed=1)
    assert other != first and other.read_bytes() != first.read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50", "densenet121", "shufflenet", "inception_v2"])
def test_zoo_examples_give_finite_unsaturated_outputs(name: str) -> None:
    import onnxruntime as ort

    m = ortlab.examples.load(name)
    sess = ort.InferenceSession(str(m.path), providers=["CPUExecutionProvider"])
    out = sess.run(None, dict(m.example_inputs()))[0]
    assert np.isfinite(out).all()
    assert out.max() < 0.99, "softmax must not be saturated (weights should be well scaled)"


def test_one_grammar_of_dims() -> None:
    """The CLI, the Lab's dims box and its sweep box read dims with one parser."""
    from ortlab.core.grammar import parse_dims

    assert parse_dims("batch=1, sequence=128") == {"batch": 1, "sequence": 128}
    assert parse_dims("batch=1; sequence=128") == {"batch": 1, "sequence": 128}
    assert parse_dims("") == {}
    assert parse_dims("past=0,128,512; batch=1", many=True) == {"past": [0, 128, 512], "batch": [1]}
    for bad, many in (("batch=x", False), ("=1", False), ("batch", False), ("b=1,a", True)):
        with pytest.raises(ortlab.FeedError, match="is not name="):
            parse_dims(bad, many=many)  # type: ignore[call-overload]
    assert parse_dims("batch=, sequence=16") == {"sequence": 16}  # a blank dim is not given
