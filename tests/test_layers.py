"""Each node's transformer layer from the graph's structure, not its name (issue 46 item 1):
checked against what the exporters themselves recorded — dynamo's module path in each node's
metadata (read here with the ast module), the TorchScript exporter's and the genai builder's
node names — and on a copy whose metadata and initializer names are gone, where only the
structure (the caches, the residual stream) can say."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import onnx
import pandas as pd
import pytest

import ortlab
from ortlab.core.graph import graph_nodes
from ortlab.core.layers import layer_map

HERE = Path(ortlab.__file__).parent / "decoders"
DYNAMO = HERE / "dynamo_llama" / "model.onnx"
_TRUTH = re.compile(r"\.layers(?:\.slice\([^)]*\))?\.(\d+)$")
_NAMED = re.compile(r"/(?:layers|h)\.(\d+)/")
COMPUTE = {"MatMul", "Softmax", "Sigmoid", "Pow", "ReduceMean", "Reciprocal", "Neg"}


def _pairs(m: ortlab.Model) -> list[tuple[int, str, str, str, str]]:
    d = m.decoder
    assert d is not None
    return [(p.layer, p.past_key, p.past_value, p.present_key, p.present_value) for p in d.pairs]


def _module_layer(node: onnx.NodeProto) -> int | None:
    """The layer dynamo recorded: the deepest module scope under model.layers."""
    for prop in node.metadata_props:
        if prop.key == "pkg.torch.onnx.name_scopes":
            for scope in reversed(ast.literal_eval(prop.value)):
                found = _TRUTH.search(scope)
                if found:
                    return int(found.group(1))
            return None
    raise AssertionError(f"{node.name} has no module path")


def _anonymous(proto: onnx.ModelProto) -> onnx.ModelProto:
    """The same graph with no metadata and initializers named w0, w1, …"""
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    rename = {t.name: f"w{k}" for k, t in enumerate(out.graph.initializer)}
    for t in out.graph.initializer:
        t.name = rename[t.name]
    for node in out.graph.node:
        del node.metadata_props[:]
        for k, name in enumerate(node.input):
            node.input[k] = rename.get(name, name)
    return out


def test_the_dynamo_llamas_layers_are_its_module_paths() -> None:
    """No node name says a layer (the premise); every node's layer equals the module path
    dynamo wrote in its metadata, and the heads come from the weights (no config is beside the
    model)."""
    m = ortlab.load(DYNAMO)
    proto = onnx.load(DYNAMO)
    assert not any(_NAMED.search(n.name) or "layers" in n.name for n in proto.graph.node)
    found = m.layers
    assert found is not None
    for node in proto.graph.node:
        assert found.of(node.name) == _module_layer(node), node.name
    assert {found.of(n.name) for n in proto.graph.node} == {None, 0, 1}
    d = m.decoder
    assert d is not None and d.source == "graph" and d.heads == 4 and d.kv_heads == 2


def test_with_no_metadata_and_no_weight_names_the_structure_finds_the_layers() -> None:
    """Only the caches and the residual stream left to read: every compute node (the
    projections, attention's Softmax, the norms, the MLP's activation) is in the layer dynamo
    recorded, the embedding and the head outside; what differs is only shape and mask
    arithmetic several layers share."""
    proto = onnx.load(DYNAMO)
    bare = _anonymous(proto)
    found = layer_map(bare.graph, _pairs(ortlab.load(DYNAMO)))
    assert found.counts()["metadata"] == found.counts()["weights"] == 0
    wrong = []
    for node in proto.graph.node:
        truth = _module_layer(node)
        if found.of(node.name) != truth:
            wrong.append((node.name, node.op_type))
            assert node.op_type not in COMPUTE, (node.name, truth, found.of(node.name))
    assert len(wrong) <= 0.06 * len(proto.graph.node), wrong
    matmuls = [n for n in proto.graph.node if n.op_type == "MatMul"]
    head = matmuls[-1]  # logits
    assert head.output[0] in {o.name for o in proto.graph.output} or found.of(head.name) is None


@pytest.mark.parametrize(
    "name", ["genai_int4", "genai_fp32", "optimum_llama", "optimum_gpt2_merged"]
)
def test_other_exporters_layers_agree_with_the_names_they_wrote(name: str) -> None:
    """genai's builder and the TorchScript exporter name nodes by module (/model/layers.3/…):
    every compute node so named is in that layer by structure; optimum's merged GPT-2 is read
    inside its If's branches (its final norm shares layer 0's deduplicated weight: not a
    layer-0 node)."""
    m = ortlab.load(HERE / name)
    found = m.layers
    assert found is not None
    nodes = [(n.name.split("#")[0], n.op_type) for n in graph_nodes(m.proto.graph, True)]
    checked = 0
    for node, op in nodes:
        said = _NAMED.search(node)
        if said and (op in COMPUTE or "Attention" in op or "Norm" in op):
            k = int(said.group(1))  # genai names its final norm layers.<n>: after the layers
            assert found.of(node) == (k if k < found.layers else None), node
            checked += 1
        if "lm_head" in node or "ln_f" in node or "/norm/" in node:
            assert found.of(node) is None, node
    assert checked >= 8


def test_a_node_ort_fused_takes_the_layer_of_the_node_it_started_from() -> None:
    """ORT names a fused node after the original it started from
    (``<node>/SimplifiedLayerNormFusion/``): its layer is that node's."""
    found = ortlab.load(HERE / "optimum_llama").layers
    assert found is not None
    name = "/model/layers.1/post_attention_layernorm/Mul_1"
    assert found.of(name) == 1
    assert found.of(name + "/SimplifiedLayerNormFusion/") == 1
    assert found.source_of(name + "/SimplifiedLayerNormFusion/").startswith("fused: ")


def test_by_layer_on_the_dynamo_llama_finds_every_layer() -> None:
    """A profiled generation at ORT's default level (fused nodes included): both layers and
    the outside found; each profiled MatMul's layer is its module path's; the decode time
    inside the layers is the time of the nodes dynamo put there."""
    g = ortlab.generate(
        ortlab.examples.load("tiny_llama_dynamo"), prompt=8, new_tokens=6, runs=2, progress=False
    )
    proto = onnx.load(DYNAMO)
    truth = {n.name: _module_layer(n) for n in proto.graph.node}
    layers = g.by_layer()
    decode = layers[layers["phase"] == "decode"]
    assert set(decode["layer"]) == {-1, 0, 1}
    t = g.by_phase()
    assert set(t["layer_source"]) <= {"cache", "metadata", "fused: cache", "fused: metadata"}
    for row in t.itertuples():
        base = row.node.split("/")[0]  # a fused node: the original it started from
        if base in truth:
            assert (None if pd.isna(row.layer) else int(row.layer)) == truth[base], row.node
    inside = float(decode[decode["layer"] >= 0]["share"].sum())
    assert 0.5 < inside < 1.0
    assert ortlab.GenerationResult.from_json(g.to_json()) == g
