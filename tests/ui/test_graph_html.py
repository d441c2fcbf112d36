"""The graph view's standalone HTML in headless Chromium: it lays out, paints the EP colours,
shows hostile node names as text and runs no script from the model."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

import ortlab
from tests import models

pytestmark = pytest.mark.ui

HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


def _open(page: Any, path: Path) -> str:
    page.goto(path.as_uri())
    status = page.locator(".ortlab-status", has_text="layout")
    status.wait_for(timeout=30_000)
    return str(status.text_content())


def _roof_heat(fraction: float) -> tuple[int, int, int]:
    """overlays.js roofHeat, written again here: pale at or above the bound, a hundredth or less
    of it the strongest red, on a log scale (Math.round: halves up)."""
    t = -math.log10(min(1.0, fraction)) / 2 if fraction > 0 else 1.0
    k = max(0.0, min(1.0, t))
    pale, red = (255, 245, 200), (165, 15, 21)
    r, g, b = (math.floor(a + (z - a) * k + 0.5) for a, z in zip(pale, red, strict=True))
    return r, g, b


def _pixels(page: Any, rgb: tuple[int, int, int]) -> int:
    """How many canvas pixels have exactly this colour."""
    return int(
        page.evaluate(
            """([r, g, b]) => {
            const c = document.querySelector('.ortlab-canvas');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 0; i < d.length; i += 4)
                if (d[i] === r && d[i+1] === g && d[i+2] === b) n++;
            return n;
        }""",
            list(rgb),
        )
    )


def test_openvino_split_painted_by_provider(page: Any, tmp_path: Path, artifacts: Path) -> None:
    from tests.test_placement import _replay

    m = ortlab.examples.load("nan_guard_cnn")
    path = ortlab.graph(m, placement=_replay()).to_html(tmp_path / "split.html")
    assert "9 nodes" in _open(page, path)
    page.screenshot(path=str(artifacts / "graph_nan_guard_cnn_by_ep.png"))
    assert _pixels(page, (0xF5, 0x85, 0x18)) > 1000, "OpenVINO nodes are orange"
    assert _pixels(page, (0x4C, 0x78, 0xA8)) > 100, "the CPU island is blue"
    assert _pixels(page, (0xD6, 0x27, 0x28)) > 0, "EP boundary edges are red"
    legend = page.locator(".ortlab-legend").text_content()
    assert "OpenVINOExecutionProvider" in legend and "crosses execution providers" in legend
    assert page.errors == [] and page.dialogs == []


def test_hostile_names_are_text(page: Any, tmp_path: Path) -> None:
    proto = models.add([1, 4])
    proto.graph.node[0].name = HOSTILE
    path = ortlab.graph(ortlab.load(proto)).to_html(tmp_path / "hostile.html")
    _open(page, path)
    box = page.locator(".ortlab-canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    tip = page.locator(".ortlab-tooltip")
    tip.wait_for(state="visible", timeout=5_000)
    assert HOSTILE in tip.text_content()
    assert page.locator(".ortlab-tooltip img, .ortlab-tooltip script").count() == 0
    assert page.dialogs == [] and page.errors == []


@pytest.mark.slow
def test_resnet50_by_time(page: Any, tmp_path: Path, artifacts: Path) -> None:
    m = ortlab.examples.load("resnet50")
    pl = ortlab.placement(m, runs=2, progress=False)
    path = ortlab.graph(m, placement=pl, color_by="time").to_html(tmp_path / "r50.html")
    assert "176 nodes" in _open(page, path)
    page.screenshot(path=str(artifacts / "graph_resnet50_by_time.png"))
    page.locator(".ortlab-color-by").select_option("provider")
    assert _pixels(page, (0x4C, 0x78, 0xA8)) > 1000, "repainted by provider: all CPU blue"
    page.screenshot(path=str(artifacts / "graph_resnet50_by_ep.png"))
    # 176 unscoped nodes start as 17 repeated-block boxes (+ input and output); search opens
    assert "19 shown" in page.locator(".ortlab-status").text_content()  # the right one
    page.fill(".ortlab-search", "n142")
    page.press(".ortlab-search", "Enter")
    page.locator(".ortlab-status", has_text="30 shown").wait_for(timeout=20_000)
    assert page.errors == []


def test_squeezenet_by_share_of_its_bound(page: Any, tmp_path: Path, artifacts: Path) -> None:
    """The roofline colouring at level 'all' (fused kernels mapped back by the placement): the
    legend says what the colours mean, and nodes far under their bound are strong colours."""
    m = ortlab.examples.load("squeezenet")
    cfg = {"level": "all"}
    roof = ortlab.roofline(m, cfg, runs=3, warmup=1, progress=False)
    pl = ortlab.placement(m, cfg, runs=3, progress=False)
    w = ortlab.graph(m, placement=pl, roofline=roof)
    assert w.color_by == "roofline"
    w.expanded = [gr.id for gr in w.graph_data.groups]  # every node in sight
    page.set_viewport_size({"width": 1280, "height": 800})
    _open(page, w.to_html(tmp_path / "roof.html"))
    page.screenshot(path=str(artifacts / "graph_squeezenet_by_roofline.png"))
    legend = str(page.locator(".ortlab-legend").text_content())
    assert "share of what this machine allows" in legend and "of its bound" in legend
    assert "no kernel of its own in the roofline" in legend
    assert page.locator(".ortlab-color-by").input_value() == "roofline"
    # the colours are the roofline's own fractions (measured, so whether any node reaches its
    # bound depends on the machine and its load): the highest fraction's colour fills its box
    top = max(n.achieved_fraction for n in w.graph_data.nodes if n.achieved_fraction is not None)
    assert _pixels(page, _roof_heat(top)) > 200, f"the closest node to its bound ({top:.0%})"
    # pale is the bound: no node is painted it unless the closest one's colour rounds to it
    # (at or above the bound, or within half a colour step under it: a fraction of 0.995)
    pale = _pixels(page, (255, 245, 200))
    if _roof_heat(top) != (255, 245, 200):
        assert pale == 0, f"pale means at the bound; the closest node is at {top:.1%}"
    # a model whose nodes run at many fractions of their bound, each its own kernel
    small = ortlab.load(models.silu_cnn())
    roof = ortlab.roofline(small, {"level": "disabled"}, runs=3, warmup=1, progress=False)
    _open(page, ortlab.graph(small, roofline=roof).to_html(tmp_path / "silu.html"))
    page.screenshot(path=str(artifacts / "graph_silu_cnn_by_roofline.png"))
    assert page.errors == []


@pytest.mark.parametrize("name", ["tiny_llama_int4", "tiny_gpt2_merged", "resnet50"])
def test_the_graphs_node_count_is_the_model_cards(page: Any, tmp_path: Path, name: str) -> None:
    """The Graph tab counts the nodes the model card counts (bodies included): those drawn
    and those folded into their consumers, said apart (the tiny Llama's card said 33 while the
    graph said 31: two Constants folded; a merged decoder's If branches name their Constants
    alike, which a count by output name took for one)."""
    m = ortlab.examples.load(name)
    total = m.summary.node_count_total
    status = _open(page, ortlab.graph(m).to_html(tmp_path / f"{name}.html"))
    assert status.startswith(f"{total:,} nodes"), (status, total)
    g = ortlab.graph(m).graph_data
    drawn, folded = len(g.nodes), g.constants + g.identities
    assert drawn + folded == total
    assert (f"({drawn:,} drawn, " in status) == bool(folded), status


def test_a_merged_decoders_branches_are_framed_and_named(page: Any, tmp_path: Path) -> None:
    """optimum's merged decoder holds its network twice, in the two branches of one If: the
    graph frames each open branch and names it — the If, the branch, the condition it runs on
    — and, after a decode step, says which ran (the placement's own note says the same)."""
    m = ortlab.examples.load("tiny_gpt2_merged")
    pl = ortlab.placement(m, dims={"prompt": 1, "past": 16}, runs=3, progress=False)
    assert "ran its then_branch" in pl.notes[-1]
    _open(page, ortlab.graph(m, placement=pl).to_html(tmp_path / "merged.html"))
    bodies = page.locator("[data-bodies]").first.get_attribute("data-bodies") or ""
    assert sorted(bodies.splitlines()) == [
        "optimum::if ▸ else_branch (when use_cache_branch false) · did not run",
        "optimum::if ▸ then_branch (when use_cache_branch true) · ran in these runs",
    ]
    _open(page, ortlab.graph(m).to_html(tmp_path / "unrun.html"))  # no run: no claim
    bodies = page.locator("[data-bodies]").first.get_attribute("data-bodies") or ""
    assert sorted(bodies.splitlines()) == [
        "optimum::if ▸ else_branch (when use_cache_branch false)",
        "optimum::if ▸ then_branch (when use_cache_branch true)",
    ]
