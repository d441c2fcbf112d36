"""The graph view's wire form, decoded by the browser itself: graph/wire.js ``unpack`` run in
Chromium on ``pack(graph)`` must give back exactly ``GraphData.to_dict()`` (tensors
as a Map there, compared as an object), on real exports and on a graph where every column
holds non-default values, names outside the Basic Multilingual Plane included (the string
table counts shared prefixes in UTF-16 units, as JavaScript does)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import helper

import ortlab
from ortlab.analysis.graph.data import GraphData, graph_data
from ortlab.views.colors import hash_color, palette, provider_color
from ortlab.views.graph.pack import pack
from ortlab.views.graph.page import module_sources
from ortlab.views.html import script_json
from tests import corpus, models

pytestmark = pytest.mark.ui

_UNPACK = """async ([source, packed]) => {
    const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
    const wire = await import(url);
    const g = wire.unpack(JSON.parse(packed));
    return JSON.stringify({ ...g, tensors: Object.fromEntries(g.tensors) });
}"""


def _browser_unpacks(page: Any, tmp_path: Path, g: GraphData) -> dict[str, Any]:
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><title>wire</title>", encoding="utf-8")
    page.goto(blank.as_uri())
    text = page.evaluate(_UNPACK, [module_sources()["wire"], script_json(pack(g))])
    decoded: dict[str, Any] = json.loads(text)
    return decoded


def _expected(g: GraphData) -> dict[str, Any]:
    """``to_dict()`` and the palette the views colour with (it travels with the graph)."""
    expected: dict[str, Any] = json.loads(script_json(g.to_dict()))  # NaN -> null, as sent
    return {**expected, "colors": palette()}


def _astral_model() -> onnx.ModelProto:
    """Names sharing prefixes that end inside and after characters beyond U+FFFF."""
    names = ["🙂/a", "🙂/b", "🙂🙃/c", "x🙂", "x🙂y"]
    nodes, prev = [], "in 🙂"
    for i, name in enumerate(names):
        nodes.append(helper.make_node("Relu", [prev], [f"{name}:out{i}"], name=name))
        prev = f"{name}:out{i}"
    io = [models.vi("in 🙂", shape=[1, 4])], [models.vi(prev, shape=[1, 4])]
    return models.make(nodes, *io, name="astral")


def _every_column(g: GraphData) -> GraphData:
    """Non-default values in every node column (a diff, predicted placement, quantization
    error, memory, roofline), alternating with defaults so no column is dropped as all-default."""
    nodes = []
    for i, n in enumerate(g.nodes):
        odd = bool(i % 2)
        nodes.append(
            dataclasses.replace(
                n,
                delta_us=-1.5 * i if i % 3 else None,
                diff_verdict="slower" if odd else "",
                predicted=odd,
                sqnr_db=float("inf") if i == 1 else 20.0 + i if odd else None,
                output_bytes=4096 * i if odd else -1,
                partition=i % 2 - 1,
                status="fused" if odd else "",
                optimized=[n.name, "fused_1"] if odd else [],
                achieved_fraction=0.05 * i if odd else None,
                roof_bound="memory" if odd else "",
                roof_ceiling="20.1 GB/s" if i % 3 == 1 else "",
            )
        )
    groups = [
        dataclasses.replace(gr, achieved_fraction=0.25 if i % 2 else None)
        for i, gr in enumerate(g.groups)
    ]
    return dataclasses.replace(g, nodes=nodes, groups=groups)


def test_browser_restores_real_exports(page: Any, tmp_path: Path) -> None:
    for m in (corpus.load("picodet_layout"), ortlab.load(models.broadcast_chain(300))):
        g = graph_data(m)
        assert _browser_unpacks(page, tmp_path, g) == _expected(g), m.name
        assert len(script_json(pack(g))) < len(script_json(g.to_dict())) / 3, m.name


def test_browser_restores_every_column_and_astral_names(page: Any, tmp_path: Path) -> None:
    from tests.test_placement import _replay

    pl = _replay({"/sanitize/IsNaN": "refused"})  # an OpenVINO/CPU split: EPs, time, reasons
    g = _every_column(graph_data(ortlab.examples.load("nan_guard_cnn"), placement=pl))
    assert any(e.boundary for e in g.edges) and any(n.reason for n in g.nodes)
    assert _browser_unpacks(page, tmp_path, g) == _expected(g)
    astral = graph_data(ortlab.load(_astral_model()))
    assert _browser_unpacks(page, tmp_path, astral) == _expected(astral)
    assert page.errors == []


def test_browser_scopes_a_merged_decoders_branches_as_python_does(
    page: Any, tmp_path: Path
) -> None:
    """optimum's merged GPT-2 holds its network in both If branches under the same tensor
    names: the browser's edges (scoped by body) equal graph_data's."""
    g = graph_data(ortlab.examples.load("tiny_gpt2_merged"))
    assert {n.body for n in g.nodes} >= {"optimum::if/then_branch", "optimum::if/else_branch"}
    assert _browser_unpacks(page, tmp_path, g) == _expected(g)


_DESCRIBE = """async ([wireSource, dataSource, packed, name]) => {
    const load = (src) => import(URL.createObjectURL(new Blob([src], { type: "text/javascript" })));
    const wire = await load(wireSource), data = await load(dataSource);
    const g = wire.unpack(JSON.parse(packed));
    const node = g.nodes.find((n) => n.name === name);
    return data.describe({ kind: "node", ...node }, g.tensors);
}"""


def test_the_details_panel_shows_a_fused_nodes_part_and_its_kernels_time(
    page: Any, tmp_path: Path
) -> None:
    """The panel's text (graph/data.js ``describe``, run in the browser on the wire form): a
    node ORT fused into another's kernel says so and shows that kernel's time as the Profile
    tab lists it (it showed no time at all), and what the times are."""
    m = ortlab.examples.load("conv_bn_relu")
    pl = ortlab.placement(m, runs=5, progress=False)
    g = graph_data(m, placement=pl)
    n = next(n for n in g.nodes if n.op_type == "BatchNormalization")  # folded into its Conv
    conv = next(c for c in g.nodes if c.op_type == "Conv" and c.optimized == n.optimized)
    kernel_us = float(pl.profile.by_node().set_index("node").loc[n.optimized[0], "us_per_run"])
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><title>describe</title>", encoding="utf-8")
    page.goto(blank.as_uri())
    src = module_sources()
    packed = script_json(pack(g))
    text = page.evaluate(_DESCRIBE, [src["wire"], src["data"], packed, n.name])
    assert f"time: none of its own (fused into {conv.name}); {n.optimized[0]}: " in text
    assert f"{kernel_us:.1f} µs/run · median run, profiling on" in text
    text = page.evaluate(_DESCRIBE, [src["wire"], src["data"], packed, conv.name])
    assert f"time: {conv.us_per_run:.1f} µs/run" in text and conv.time_source in text
    assert conv.us_per_run == pytest.approx(kernel_us)  # the Conv carries the whole kernel


def test_the_details_panel_shows_a_nodes_share_of_its_bound(page: Any, tmp_path: Path) -> None:
    """'of its bound: 42 % (compute-bound, 99.5 GFLOP/s)': the roofline's very fraction."""
    m = ortlab.load(models.silu_cnn())
    roof = ortlab.roofline(m, {"level": "disabled"}, runs=3, warmup=1, progress=False)
    g = graph_data(m, roofline=roof)
    row = next(r for r in roof.rows if r.bound == "compute")
    node = next(n for n in g.nodes if n.name == row.node)
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><title>describe</title>", encoding="utf-8")
    page.goto(blank.as_uri())
    src = module_sources()
    text = page.evaluate(_DESCRIBE, [src["wire"], src["data"], script_json(pack(g)), row.node])
    pct = 100 * row.achieved_fraction
    shown = f"{pct:.0f}" if pct >= 10 else f"{pct:.1f}" if pct >= 1 else f"{pct:.1g}"
    assert f"of its bound: {shown} % (compute-bound, {node.roof_ceiling})" in text, text
    assert page.errors == []


_COLORS = """async ([source, colors, names]) => {
    const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
    const overlays = await import(url);
    overlays.useColors(colors);
    return names.map((n) => overlays.providerColor(n));
}"""


def test_the_graph_colours_an_ep_as_the_charts_do(page: Any, tmp_path: Path) -> None:
    """One palette: overlays.js, given the palette the graph carries, colours every EP as
    the figures do, the known ones and those coloured by a hash of their name (names beyond
    U+FFFF included: the hash reads UTF-16 units, as JavaScript does)."""
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><title>colours</title>", encoding="utf-8")
    page.goto(blank.as_uri())
    names = [
        "CPUExecutionProvider",
        "QNNExecutionProvider",
        "VitisAIExecutionProvider",
        "MIGraphXExecutionProvider",
        "MyEP\U0001f680",
        "",
        "ÉpÉ",
    ]
    got = page.evaluate(_COLORS, [module_sources()["overlays"], palette(), names])
    assert got == [provider_color(n) for n in names]
    hashed = {hash_color(n) for n in names[2:]}
    assert len(hashed) > 1, "unknown EPs do not all share one colour"
