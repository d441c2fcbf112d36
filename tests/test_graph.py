"""Graph data and the graph widget, through their state (no browser)."""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import ortlab
from ortlab.analysis.graph.data import GHOST_FANOUT, graph_data
from tests import corpus, models
from tests.graphwire import node_strings, page_state

HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>\x1b[31m'


@pytest.fixture(scope="module")
def split_placement() -> ortlab.PlacementResult:
    from tests.test_placement import _replay

    return _replay()


def test_graph_data_joins_placement(split_placement: ortlab.PlacementResult) -> None:
    m = ortlab.examples.load("nan_guard_cnn")
    g = graph_data(m, placement=split_placement)
    by = {n.name: n for n in g.nodes}
    assert by["/sanitize/IsNaN"].provider == "CPUExecutionProvider"
    assert by["/features/0/Conv"].provider == "OpenVINOExecutionProvider"
    assert by["/features/0/Conv"].status == "compiled"
    assert g.providers == ["OpenVINOExecutionProvider", "CPUExecutionProvider"]
    boundary = {e.tensor for e in g.edges if e.boundary}
    assert boundary == {"/features/1/Relu_output_0", "/sanitize/IsNaN_output_0"}
    assert g.has_time and sum(n.share for n in g.nodes) == pytest.approx(1.0, abs=0.05)
    assert by["/features/0/Conv"].group == "/features/0"
    assert by["/features/0/Conv"].attrs["pads"] == "[1, 1, 1, 1]"


def test_scope_groups_and_initial_collapse(bert_tiny: ortlab.Model) -> None:
    g = graph_data(bert_tiny)
    ids = {gr.id for gr in g.groups}
    assert {"/encoder", "/encoder/layer.0", "/encoder/layer.0/attention"} <= ids
    enc = next(gr for gr in g.groups if gr.id == "/encoder")
    assert enc.size == sum(1 for n in g.nodes if n.group.startswith("/encoder"))
    assert "/encoder" in g.expanded and set(g.expanded) < ids, "115 nodes: deepest scopes shut"
    reshaped = g.tensors["/encoder/layer.0/attention/self/query/Reshape_output_0"]
    assert reshaped == "float[batch, sequence, 4, 32]", "shapes inferred for the hover details"
    small = graph_data(ortlab.examples.load("nan_guard_cnn"))
    assert set(small.expanded) == {gr.id for gr in small.groups}, "a small graph starts open"


def test_large_graphs_start_collapsed() -> None:
    big = ortlab.load(ortlab.examples.bert_tiny(layers=8))
    g = graph_data(big)
    from ortlab.analysis.graph.blocks import COLLAPSE_ABOVE, _visible_count

    assert len(g.nodes) > 300
    assert "/encoder" in g.expanded
    assert len(g.expanded) < len(g.groups), "the deepest scopes start collapsed"
    assert _visible_count(g.groups, set(g.expanded), len(g.nodes)) <= COLLAPSE_ABOVE


def test_broadcast_tensors_become_ghost_edges() -> None:
    big = ortlab.load(ortlab.examples.bert_tiny(layers=10))
    g = graph_data(big)
    ghosts = [e for e in g.edges if e.ghost]
    assert ghosts and {e.tensor for e in ghosts} == {"/extended_mask/Mul_output_0"}
    assert len(ghosts) > GHOST_FANOUT and g.notes


def test_graph_data_round_trip_and_control_flow() -> None:
    g = graph_data(ortlab.load(models.with_if()))
    assert (
        "subgraph (1 nodes)" in next(n for n in g.nodes if n.op_type == "If").attrs["then_branch"]
    )
    again = type(g).from_json(g.to_json())
    assert again == g


def test_widget_state(split_placement: ortlab.PlacementResult) -> None:
    m = ortlab.examples.load("nan_guard_cnn")
    w = ortlab.graph(m, placement=split_placement)
    assert w.color_by == "provider" and len(w.graph_data.nodes) == 9
    assert "export const { layout, Graph }" in w.dagre_src
    import traitlets

    w.color_by = "time"
    with pytest.raises(traitlets.TraitError, match="choose one of provider"):
        w.color_by = "rainbow"
    w.highlight(["/sanitize/IsNaN"])
    assert w.highlighted == ["/sanitize/IsNaN"]
    w.highlight(split_placement.nodes.head(2))
    assert len(w.highlighted) == 2
    with pytest.raises(KeyError, match="is a node of this graph"):
        w.highlight(["nope"])
    with pytest.raises(TypeError, match="unexpected arguments"):
        ortlab.graph(m, colour="time")


def test_html_export_is_self_contained_and_escapes(tmp_path: Path) -> None:
    proto = models.add()
    proto.graph.node[0].name = HOSTILE
    w = ortlab.graph(ortlab.load(proto))
    out = w.to_html(tmp_path / "g.html")
    page = out.read_text()
    assert "<script>alert(2)" not in page and "<img src=x" not in page
    assert "http://" not in page.split("<script")[0] and "cdn" not in page.lower()
    assert "Content-Security-Policy" in page
    assert node_strings(page_state(page)["data"], 0)["name"] == HOSTILE


def test_graph_modules_are_small_hashed_and_write_no_markup(tmp_path: Path) -> None:
    """graph/*.js: one file per concern, each small; the page runs them from its one hashed
    inline script (the texts travel as data, like the widget's ``modules`` trait); no module
    writes markup."""
    import re

    from ortlab.views.graph import widget as gv
    from ortlab.views.html import csp_hash

    folder = Path(gv.__file__).parent
    files = [folder / "index.js", *(folder / f"{name}.js" for name in gv.MODULES)]
    assert sorted(files) == sorted(folder.glob("*.js")), "every module is loaded, none is stray"
    for f in files:
        text = f.read_text(encoding="utf-8")
        assert len(text.splitlines()) < 250, f"{f.name} is too long to read in one go"
        starts = [
            i
            for i, line in enumerate(text.splitlines())
            if re.match(r"(export )?(async )?function ", line)
        ]
        for i in starts:
            length = next(j for j, line in enumerate(text.splitlines()[i:]) if line == "}")
            assert length <= 60, f"{f.name}: the function on line {i + 1} has {length} lines"
        code = re.sub(r"^\s*//.*$", "", text, flags=re.M)  # comments may name the sinks
        sinks = re.findall(
            r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|"
            r"\beval\(|new Function",
            code,
        )
        assert sinks == [], f"{f.name} writes markup: {sinks}"
        assert not re.search(r"^\s*import\b|\bimport\s*\(\s*[\"']", code, flags=re.M), (
            f"{f.name} imports by path: blob: modules get their peers from index.js"
        )

    w = ortlab.graph(ortlab.load(models.add()))
    assert w._esm == (folder / "index.js").read_text(encoding="utf-8")
    assert w.modules == {f.stem: f.read_text(encoding="utf-8") for f in files[1:]}
    page = w.to_html(tmp_path / "g.html").read_text(encoding="utf-8")
    scripts = re.findall(
        r"<script(?! type=\"application/json\")[^>]*>(.*?)</script>", page, flags=re.S
    )
    assert len(scripts) == 1, "one inline script: the loader (data and modules are a data block)"
    policy = re.search(r'Content-Security-Policy" content="([^"]+)"', page)
    assert policy and csp_hash(scripts[0]) in policy.group(1)
    script_src = policy.group(1).split("script-src", 1)[1].split(";")[0].split()
    assert script_src == [csp_hash(scripts[0]), "blob:"], "only the hash and blob: modules"
    state = page_state(page)
    assert state["modules"] == w.modules, "the page runs the widget's very modules"
    assert state["data"] == w.data, "and draws the widget's very data"


def test_netron_serves_the_model_locally_and_stops() -> None:
    import urllib.request

    v = ortlab.netron(ortlab.examples.load("mlp"))
    assert v.url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(v.url, timeout=10) as r:  # the loopback address only
        assert r.status == 200
    assert "<iframe" in v.value and "localhost" in v.value
    v.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(v.url, timeout=2)


def test_graph_diff_links_fused_nodes() -> None:
    m = ortlab.examples.load("conv_bn_relu")
    opt = ortlab.optimization_diff(
        m, levels=["disabled", "extended"], measure=False, progress=False
    )
    d = ortlab.graph_diff(opt, "disabled", "extended")
    conv = "/features/block0/Conv"
    d.left.selected = {"name": conv}
    assert len(d.right.highlighted) == 1, "Conv+BN+Relu became one FusedConv"
    fused = d.right.highlighted[0]
    d.right.selected = {"name": fused}
    assert set(d.left.highlighted) == {
        conv,
        "/features/block0/BatchNormalization",
        "/features/block0/Relu",
    }
    d.left.selected = {}
    assert d.right.highlighted == []


def test_repeated_blocks_where_scopes_are_missing(resnet50: ortlab.Model) -> None:
    g = graph_data(resnet50)
    labels = [gr.label for gr in g.groups]
    assert len(labels) >= 17, "stem, 16 bottlenecks, head"
    assert sum(", like block" in lb for lb in labels) >= 12, "bottlenecks repeat"
    assert g.expanded == [], "176 unscoped nodes start as 17 block boxes"
    ov = g.overview()
    assert ov["kind"].tolist() == ["input", *["group"] * 17, "output"]
    assert all(n.group for n in g.nodes)


def test_a_flat_10k_node_export_opens_on_a_readable_first_picture() -> None:
    """Issue 38: a 10,015-node transformer whose names carry no scopes (``MatMul_12``) opens
    on at most COLLAPSE_ABOVE items, every node in one of them, each block named after the
    ops that do its work and the repeated layers found."""
    from ortlab.analysis.graph.blocks import COLLAPSE_ABOVE
    from ortlab.engine.examples import bert_tiny

    proto = bert_tiny(layers=200, hidden=16, heads=2, vocab=50)
    for i, n in enumerate(proto.graph.node):
        n.name = f"{n.op_type}_{i}"
    g = graph_data(ortlab.load(proto))
    ov = g.overview()
    assert len(ov) <= COLLAPSE_ABOVE, len(ov)
    assert ov["nodes"].sum() == len(g.nodes) == len(proto.graph.node)
    blocks = ov[ov["kind"] == "group"]["name"].tolist()
    assert all("MatMul" in b for b in blocks), blocks[:3]
    assert sum(", like block" in b for b in blocks) >= len(blocks) // 2, blocks


def test_profile_of_a_fused_graph_says_what_it_cannot_show() -> None:

    m = ortlab.load(ortlab.examples.mlp())
    p = ortlab.profile(m, runs=2, progress=False)  # level all: MatMul+Add become one Gemm
    with pytest.warns(ortlab.OrtlabWarning, match="not nodes of this model"):
        graph_data(m, profile=p)
    g = ortlab.graph(m)
    names = [*[n.name for n in m.proto.graph.node][:2], "/layers.0/MatMul/MatMulAddFusion"]
    with pytest.warns(ortlab.OrtlabWarning, match="1 of 3 names are not nodes"):
        g.highlight(names)
    assert g.highlighted == names[:2]


def test_a_boundary_inside_a_collapsed_group_shows_on_the_group() -> None:
    from ortlab.analysis.graph.data import _groups
    from ortlab.analysis.graph.elements import GraphEdge, GraphNode

    cpu, ov = "CPUExecutionProvider", "OpenVINOExecutionProvider"
    nodes = [
        GraphNode(0, "a", "Conv", "", "/blk", ov),
        GraphNode(1, "b", "IsNaN", "", "/blk/x", cpu),
        GraphNode(2, "c", "Relu", "", "/other", ov),
    ]
    edges = [GraphEdge(0, 1, "t0", True, False), GraphEdge(1, 2, "t1", True, False)]
    got = {g.id: g.boundaries for g in _groups(nodes, edges)}
    assert got == {"/blk": 1, "/blk/x": 0, "/other": 0}, "only a→b has both ends inside /blk"


def test_a_fused_nodes_details_show_its_kernels_time_as_the_profile_lists_it() -> None:
    """One time per node: a node ORT fused into a kernel with others shows its credited part
    and, beside it, the whole kernel's time, which is the Profile tab's number for that
    kernel (it showed only an even split, unsaid). The panel's text: tests/ui/test_graph_wire."""
    m = ortlab.examples.load("conv_bn_relu")
    pl = ortlab.placement(m, runs=5, progress=False)
    prof = pl.profile.by_node().set_index("node")["us_per_run"]
    g = graph_data(m, placement=pl)
    shared = [
        n
        for n in g.nodes
        if len(n.optimized) == 1 and sum(n.optimized == o.optimized for o in g.nodes) > 1
    ]
    assert shared, "conv_bn_relu fuses nodes into one kernel at level all"
    credited: dict[str, float] = {}
    for n in shared:
        [kernel] = n.optimized
        assert n.group_us_per_run == pytest.approx(prof[kernel], rel=1e-9)
        assert n.time_source  # "measured (kernel of 3)", "fused into …", "… (even split)"
        credited[kernel] = credited.get(kernel, 0.0) + n.us_per_run
    for kernel, total in credited.items():  # each kernel's time credited exactly once
        assert total == pytest.approx(prof[kernel], rel=1e-9)


# Ops whose work is a block's name when it holds one: this test's own list, not ortlab's.
_WORK = {
    "Conv",
    "ConvInteger",
    "QLinearConv",
    "ConvTranspose",
    "MatMul",
    "MatMulInteger",
    "Gemm",
    "LSTM",
    "GRU",
    "Attention",
    "Einsum",
    "If",
    "Loop",
    "Scan",
}


def _block_members(g: Any, group_id: str) -> list[Any]:
    return [n for n in g.nodes if n.group == group_id or n.group.startswith(group_id + "/")]


def _first_named(label: str) -> str:
    """'block 03, like block 01: Conv x3 + Mul x6 (+10 more)' -> 'Conv' (x: a times sign)."""
    named = label.split(": ", 1)[1].removeprefix("data movement: ")
    return named.split(" + ")[0].split(" ×")[0].split(" (")[0]


@pytest.mark.corpus
@pytest.mark.parametrize("name", corpus.NAMES)
def test_first_picture_of_every_real_model(name: str) -> None:
    """The first picture of each corpus model: at most COLLAPSE_ABOVE items (graph inputs and
    outputs counted), the nodes all accounted for, and every block named after the work it
    holds (recounted from its members: a block with a Conv or MatMul is never named after the
    Mul or Cast it has more of)."""
    from ortlab.analysis.graph.blocks import COLLAPSE_ABOVE

    g = graph_data(corpus.load(name))
    ov = g.overview()
    assert len(ov) <= COLLAPSE_ABOVE, ov
    assert ov["nodes"].sum() == len(g.nodes)
    for gr in g.groups:
        if not gr.label.startswith("block ") or gr.label.endswith(" groups)"):
            continue  # (a run of sibling groups is named after its first and last)
        ops = Counter(n.op_type for n in _block_members(g, gr.id))
        first = _first_named(gr.label)
        assert first in ops, gr.label
        if ops.keys() & _WORK:
            assert first in _WORK, (gr.label, ops)


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["ddddocr_int8", "picodet_layout"])
def test_a_graph_never_run_names_blocks_by_flops(name: str) -> None:
    """Without a run, a block is named after the op types doing most of its FLOPs, counted
    independently by ``ortlab.cost`` from the shapes a real run had (the graph works them out
    by ONNX shape inference at the shapes ortlab would synthesize): the int8 OCR model's blocks
    are its ConvIntegers and their DynamicQuantizeLinear, not the Muls it has more of; the
    layout model's are Conv + BatchNormalization, not the Add or Div it has more of."""
    m = corpus.load(name)
    g = graph_data(m)
    assert not any(n.us_per_run for n in g.nodes)
    cost = ortlab.cost(m, {"level": "disabled"}, m.example_inputs(), progress=False)
    flops = {r.node: r.flops for r in cost.rows}
    blocks = [gr for gr in g.groups if gr.label.startswith("block ") and gr.label.count(":") == 1]
    checked = 0
    for gr in blocks:
        by_op: Counter[str] = Counter()
        for n in _block_members(g, gr.id):
            f = flops.get(n.name, float("nan"))
            by_op[n.op_type] += 0.0 if math.isnan(f) else f
        named = [_first_named(f": {part}") for part in gr.label.split(": ", 1)[1].split(" + ")]
        ranked = [*by_op.most_common(len(named) + 1), ("", 0.0)]
        k = len(named)
        if ranked[k - 1][1] > 0 and ranked[k][1] < 0.99 * ranked[k - 1][1]:  # no near-tie
            assert named == [op for op, _ in ranked[:k]], (gr.label, by_op.most_common(4))
            checked += 1
    assert checked >= len(blocks) // 2, (checked, len(blocks))


@pytest.mark.corpus
def test_the_graph_at_a_run_names_blocks_by_time_and_shows_its_shapes() -> None:
    """With a placement (the PP-OCRv4 recognizer at H 48, W 320): each block is named after
    the op type that took most of its measured time, its share is its nodes' shares, the
    first colouring is by time (one EP ran everything), and tensors carry the run's concrete
    shapes: each kernel ORT ran under an original node's name wrote the shape the graph shows
    for that node's output (ORT's profile is the independent source). Kernels ORT renamed
    are labelled by the original nodes they compute."""
    from ortlab.views.graph.widget import GraphView

    m = corpus.load("ppocrv4_rec")
    dims = {"p2o.DynamicDimension.0": 1, "?": 48, "p2o.DynamicDimension.1": 320}
    pl = ortlab.placement(m, dims=dims, runs=3, progress=False)
    assert pl.input_shapes == {"x": [1, 3, 48, 320]}
    assert type(pl).from_json(pl.to_json()).input_shapes == pl.input_shapes
    g = graph_data(m, placement=pl)
    assert GraphView(g).color_by == "time"
    timed = {r.node: r.us_per_run for r in pl.nodes.itertuples()}
    total = sum(timed.values())
    blocks = [gr for gr in g.groups if gr.label.startswith("block ")]
    assert blocks
    for gr in blocks:
        members = _block_members(g, gr.id)
        by_op: Counter[str] = Counter()
        for n in members:
            by_op[n.op_type] += timed.get(n.name, 0.0)
        if by_op.total():
            most = max(by_op.values())  # a fused kernel's time is split evenly: ties
            assert by_op[_first_named(gr.label)] == pytest.approx(most), (gr.label, by_op)
        assert gr.share == pytest.approx(sum(timed.get(n.name, 0.0) for n in members) / total)
    from ortlab.analysis.graph.data import tensor_types

    inferred = tensor_types(m, pl.input_shapes)  # ONNX inference alone, at the run's inputs
    kernels = pl.profile.by_node().set_index("node")["output_shapes"]
    checked = 0
    for n in g.nodes:
        if n.name in kernels.index and n.outputs and len(kernels[n.name].split("], ")) == 1:
            if re.fullmatch(r"\w+\[[\d, ]*\]", inferred[n.outputs[0]]):  # inferred concrete
                assert inferred[n.outputs[0]] == kernels[n.name], n.name
                checked += 1
            assert g.tensors[n.outputs[0]] == kernels[n.name], n.name  # the view: concrete
    assert checked >= 20, checked
    assert g.tensors["x"] == "float[1, 3, 48, 320]"
    # the Lab's top-nodes list names each kernel by the original nodes it computes
    from ortlab.views.profile import kernel_label

    originals = {n.name for n in g.nodes}
    renamed = [r for r in pl.optimized_rows if r.node not in originals and r.fused_from]
    assert renamed, "level all renames kernels (NCHWc)"
    for r in renamed:
        label = kernel_label(r.node, r.fused_from)
        assert label.split(" ")[0] in originals and f"(kernel {r.node})" in label, label
    # and so does the slowest-nodes table of the report and the Lab's snapshot (one home)
    from ortlab.views.profile import fused_map, profile_node_rows

    _, rows = profile_node_rows(pl.profile, 200, fused_map(pl, pl.profile))
    named = {
        r.node: row[0] for r, row in zip(pl.profile.by_node().itertuples(), rows, strict=False)
    }
    hit = [r for r in renamed if r.node in named]
    assert hit
    for r in hit:
        assert named[r.node] == kernel_label(r.node, r.fused_from)
    other = dataclasses.replace(pl.profile, config=pl.profile.config.with_(level="basic"))
    assert fused_map(pl, other) == {}  # another level's kernels: names are not trusted


def test_a_branch_reads_its_own_branchs_tensors() -> None:
    """ONNX scopes names by graph: optimum's merged GPT-2 makes the same tensor names in its
    then_branch and else_branch; every edge into a branch node comes from that branch or from
    outside the If, never from the other branch (the picture was one row of unlinked boxes);
    and the Identity nodes that hand a shared weight to each branch are folded, named."""
    from ortlab.analysis.graph.data import graph_data
    from ortlab.core.onnx_util import walk_nodes

    m = ortlab.examples.load("tiny_gpt2_merged")
    g = graph_data(m)
    for e in g.edges:
        src, dst = g.nodes[e.src], g.nodes[e.dst]
        if dst.body and src.body:
            assert src.body == dst.body, (e.tensor, src.body, dst.body)
    then = [n for n in g.nodes if n.body.endswith("then_branch")]
    inside = sum(1 for e in g.edges if g.nodes[e.dst] in then and g.nodes[e.src] in then)
    assert inside >= len(then) - 20  # a connected network, not loose boxes
    identities = sum(1 for node, _ in walk_nodes(m.proto.graph) if node.op_type == "Identity")
    assert not any(n.op_type == "Identity" for n in g.nodes)
    assert any(f"{identities} Identity nodes that pass a weight" in x for x in g.notes)
