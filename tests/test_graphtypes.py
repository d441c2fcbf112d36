"""The graph view's tensor types and FLOPs (ortlab.analysis.graph.inferred) are worked out once per
model file: a new ``ortlab.load`` of the same file reuses them, another file does not."""

from __future__ import annotations

from pathlib import Path

import onnx

import ortlab
from ortlab.analysis.graph import inferred as graphtypes
from ortlab.core import cache
from ortlab.core.inputs import default_shapes
from tests import models


def test_a_new_load_of_the_same_file_reuses_types_and_flops() -> None:
    proto = models.broadcast_chain(20)
    a, b = ortlab.load(proto), ortlab.load(proto)
    assert a is not b and cache.is_content_path(a.path) and a.path == b.path
    assert graphtypes.types_at(a, ()) is graphtypes.types_at(b, ())
    flops = graphtypes.flops_at(a, default_shapes(a.signature))
    assert flops is graphtypes.flops_at(b, default_shapes(b.signature))
    assert flops == {f"add_{i}": 4.0 for i in range(20)}  # one formula call, every node


def test_another_file_is_worked_out_anew() -> None:
    proto = models.broadcast_chain(20)
    other = onnx.ModelProto()
    other.CopyFrom(proto)
    other.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 8
    other.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 8
    a, b = ortlab.load(proto), ortlab.load(other)
    assert graphtypes.types_at(a, ())["t3"] == "float[4]"
    assert graphtypes.types_at(b, ())["t3"] == "float[8]"


def test_only_digest_named_cache_files_are_content_paths(tmp_path: Path) -> None:
    assert not cache.is_content_path(tmp_path / ("0" * 24 + ".onnx"))
    assert not cache.is_content_path(cache.cache_dir() / "models" / "proto-1f" / "model.onnx")
