"""Graph view performance in headless Chromium, next to Netron on the same files.

Cases: transformer-shaped models of ~1k, 10k and 50k nodes (scoped names), the 10k one with flat
names (`MatMul_12`: no scopes to group by), the flat ResNet-50,
a real Paddle export without scopes (PicoDet, 1,493 nodes of which 878 Constant; from the
test corpus), the same with every group open, and a flat 10,000-node chain whose every node
reads one broadcast tensor.

Per case: Python graph_data() time, page load to the first laid-out paint (the standalone HTML
runs the same module as the widget), the layout time reported by the worker, one repaint, the
first picture (items, largest item as a share of the model, smallest label in px), and the
relayout after opening one deep group. Netron (the `netron` package's own server and UI, same
browser) on the same .onnx file: page load to its first drawn graph node. Screenshots of both
go to docs/.

    python benchmarks/graph_view.py [--sizes 1000,10000,50000] [--no-netron]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import ortlab
from benchmarks._common import record
from ortlab.analysis.graph.data import graph_data
from ortlab.engine.examples import bert_tiny
from ortlab.views.graph.pack import pack
from ortlab.views.graph.page import write_html
from tests import models
from tests.ui.conftest import ARGS, CHROMIUM  # the same browser setup as the tests

DOCS = Path(__file__).resolve().parents[1] / "docs"
NETRON_MAX = 10_000
"""Netron lays out every node; larger cases are not run in it (marked "not run")."""


def netron_view(browser: Any, model_path: Path, shot: Path | None) -> dict[str, Any]:
    """Netron's own server and UI on the same file: load to its first drawn node. Its usage
    consent is given beforehand (a cookie; otherwise it asks ipinfo.io, unreachable here, and
    waits for a click), and requests leaving localhost are refused."""
    import netron

    address = netron.start(str(model_path), address=("localhost", 0), browse=False)
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    context.add_cookies([{"name": "consent", "value": "1", "domain": "localhost", "path": "/"}])
    page = context.new_page()
    page.route("**/*", lambda r: r.continue_() if "localhost" in r.request.url else r.abort())
    try:
        t0 = time.perf_counter()
        page.goto(f"http://{address[0]}:{address[1]}/")
        # Netron forbids eval (so no wait_for_function): wait on a CSS selector
        page.locator("#canvas .node").first.wait_for(state="attached", timeout=120_000)
        ms = (time.perf_counter() - t0) * 1e3
        if shot is not None:
            page.screenshot(path=str(shot))
        return {"netron_ms": ms}
    except Exception as err:  # noqa: BLE001 - Netron failing on a case is a result
        return {"netron_ms": None, "netron_error": str(err).splitlines()[0][:120]}
    finally:
        context.close()
        netron.stop(address)


def model_with(nodes: int) -> ortlab.Model:
    layers = max(1, nodes // 50)
    return ortlab.load(bert_tiny(layers=layers, hidden=16, heads=2, vocab=50))


def flat_model_with(nodes: int) -> ortlab.Model:
    """The same transformer with its scopes gone (``MatMul_12``: a flat export's names)."""
    proto = bert_tiny(layers=max(1, nodes // 50), hidden=16, heads=2, vocab=50)
    for i, n in enumerate(proto.graph.node):
        n.name = f"{n.op_type}_{i}"
    return ortlab.load(proto)


def expand_to(page: Any, node: str) -> dict[str, Any]:
    """Search a deep node and press Enter: its scopes open and are laid out on demand."""
    root = page.locator(".ortlab-graph")
    before = root.get_attribute("data-shown")
    page.fill(".ortlab-search", node)
    t0 = time.perf_counter()
    page.press(".ortlab-search", "Enter")
    page.wait_for_function(
        f"() => document.querySelector('.ortlab-graph').dataset.shown !== '{before}'",
        timeout=120_000,
    )
    return {
        "expand_ms": (time.perf_counter() - t0) * 1e3,
        "expand_layout_ms": float(root.get_attribute("data-layout-ms")),
        "shown_after_expand": int(root.get_attribute("data-shown")),
    }


def measure(page: Any, path: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    page.goto(path.as_uri())
    page.locator(".ortlab-status", has_text="layout").wait_for(timeout=300_000)
    first = (time.perf_counter() - t0) * 1e3
    root = page.locator(".ortlab-graph")
    out = {
        "load_to_view_ms": first,
        "layout_ms": float(root.get_attribute("data-layout-ms")),
        "shown": int(root.get_attribute("data-shown")),
        "min_label_px": float(root.get_attribute("data-min-label-px") or "nan"),
    }
    page.locator(".ortlab-fit").click()  # one repaint
    out["repaint_ms"] = float(root.get_attribute("data-paint-ms"))
    box = page.locator(".ortlab-canvas").bounding_box()
    page.mouse.wheel(0, -200)
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 60)
    out["repaint_after_zoom_ms"] = float(root.get_attribute("data-paint-ms"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--no-netron", action="store_true")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from tests import corpus

    rows = []
    cases: list[tuple[str, Any, bool, str]] = [  # label, model, all groups open, screenshot
        (f"transformer ~{n}", lambda n=n: model_with(n), False, "")
        for n in map(int, args.sizes.split(","))
    ]
    cases += [
        ("transformer ~10000, flat names", lambda: flat_model_with(10000), False, ""),
        ("resnet50 (flat, no scopes)", lambda: ortlab.examples.load("resnet50"), False, ""),
        ("PicoDet (Paddle, no scopes)", lambda: corpus.load("picodet_layout"), False, "picodet"),
        ("PicoDet, every group open", lambda: corpus.load("picodet_layout"), True, ""),
        ("chain 10,000 + broadcast", lambda: ortlab.load(models.broadcast_chain()), False, "chain"),
    ]
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        for label, make, open_all, shot in cases:
            m = make()
            t0 = time.perf_counter()
            g = graph_data(m)
            data_ms = (time.perf_counter() - t0) * 1e3
            expanded = [gr.id for gr in g.groups] if open_all else list(g.expanded)
            path = write_html(pack(g), "provider", expanded, Path(tmp) / "g.html")
            ov = g.overview() if not open_all else None
            row = {
                "case": label,
                "nodes": len(g.nodes),
                "constants_folded": g.constants,
                "python_graph_data_ms": data_ms,
                "html_mb": path.stat().st_size / 1e6,
                "largest_item_share": float(ov["nodes"].max() / len(g.nodes))
                if ov is not None
                else None,
                **measure(page, path),
            }
            if shot:
                page.locator(".ortlab-fit").click()
                page.screenshot(path=str(DOCS / f"graph_ortlab_{shot}.png"))
            deep = [n.name for n in g.nodes if "/encoder/layer." in n.name]
            if deep:
                row.update(expand_to(page, deep[len(deep) // 2]))
            if not args.no_netron and not open_all and len(g.nodes) <= NETRON_MAX:
                file = Path(tmp) / "netron.onnx"
                import onnx

                onnx.save(m.proto, str(file))
                row.update(
                    netron_view(browser, file, DOCS / f"graph_netron_{shot}.png" if shot else None)
                )
            rows.append(row)
            print(row, flush=True)
        browser.close()
    lines = [
        "Headless Chromium (Debian), 2 vCPU. `page MB`: the standalone HTML (the graph packed: "
        "columns of indices into one front-coded string table). `load→view`: page load to the "
        "first laid-out paint (reading the page, JSON.parse of its state block, unpacking, "
        "visible set, dagre in a Web Worker, paint). `first picture`: items "
        "drawn and the largest as a share of the model; labels are never drawn below 10 px. "
        "Netron: the `netron` package's server and UI in the same browser, page load to its "
        "first drawn node (its renderer lays out every node; it has no groups).",
        "",
        "| case | nodes (constants folded) | first picture: items, largest | smallest label px "
        "| graph_data ms | page MB | load→view ms | layout ms | repaint ms | open a deep scope: "
        "ms (items) | Netron load→view ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        largest = f"{r['largest_item_share']:.0%}" if r["largest_item_share"] is not None else "—"
        netron = f"{r['netron_ms']:.0f}" if r.get("netron_ms") else r.get("netron_error", "not run")
        lines.append(
            f"| {r['case']} | {r['nodes']:,} ({r['constants_folded']}) | {r['shown']}, {largest} "
            f"| {r['min_label_px']:.0f} | {r['python_graph_data_ms']:.0f} | {r['html_mb']:.1f} | "
            f"{r['load_to_view_ms']:.0f} | {r['layout_ms']:.0f} | {r['repaint_ms']:.1f} | "
            + (f"{r['expand_ms']:.0f} ({r['shown_after_expand']}) |" if "expand_ms" in r else "— |")
            + f" {netron} |"
        )
    lines += [
        "",
        "Screenshots: docs/graph_ortlab_picodet.png and docs/graph_netron_picodet.png "
        "(the same file), docs/graph_ortlab_chain.png and "
        "docs/graph_netron_chain.png.",
    ]
    record("graph_view", {"rows": rows}, "\n".join(lines))


if __name__ == "__main__":
    main()
