"""Graph view performance in headless Chromium, on transformer-shaped models of ~1k, 10k and
50k nodes (scoped names, collapsed by scope), plus the flat ResNet-50.

Per size: Python graph_data() time, page load to first laid-out paint (the standalone HTML
runs the same module as the widget), the layout time reported by the worker, one repaint, and
the relayout after expanding one group.

    python benchmarks/graph_view.py [--sizes 1000,10000,50000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import ortlab
from benchmarks._common import record
from ortlab.analysis.graphdata import graph_data
from ortlab.core.examples import bert_tiny
from ortlab.views.widgets.graph import write_html
from tests.ui.conftest import ARGS, CHROMIUM  # the same browser setup as the tests


def model_with(nodes: int) -> ortlab.Model:
    layers = max(1, nodes // 50)
    return ortlab.load(bert_tiny(layers=layers, hidden=16, heads=2, vocab=50))


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
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    rows = []
    cases = [
        (f"transformer ~{n}", lambda n=n: model_with(n)) for n in map(int, args.sizes.split(","))
    ]
    cases.append(("resnet50 (flat, no scopes)", lambda: ortlab.examples.load("resnet50")))
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        for label, make in cases:
            m = make()
            t0 = time.perf_counter()
            g = graph_data(m)
            data_ms = (time.perf_counter() - t0) * 1e3
            path = write_html(g.to_dict(), "provider", list(g.expanded), Path(tmp) / "g.html")
            row = {
                "case": label,
                "nodes": len(g.nodes),
                "python_graph_data_ms": data_ms,
                "html_mb": path.stat().st_size / 1e6,
                **measure(page, path),
            }
            deep = [n.name for n in g.nodes if "/encoder/layer." in n.name]
            if deep:
                row.update(expand_to(page, deep[len(deep) // 2]))
            rows.append(row)
            print(row, flush=True)
        browser.close()
    lines = [
        "Headless Chromium (Debian), 2 vCPU. `load→view`: page load to the first laid-out "
        "paint (JSON parse, visible set, dagre in a Web Worker, paint). Scoped models start "
        "collapsed by scope.",
        "",
        "| case | nodes | shown | graph_data (Python) ms | load→view ms | layout ms | repaint ms "
        "| open a deep scope: ms (items shown) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['case']} | {r['nodes']:,} | {r['shown']} | {r['python_graph_data_ms']:.0f} | "
        f"{r['load_to_view_ms']:.0f} | {r['layout_ms']:.0f} | {r['repaint_ms']:.1f} | "
        + (f"{r['expand_ms']:.0f} ({r['shown_after_expand']}) |" if "expand_ms" in r else "— |")
        for r in rows
    ]
    record("graph_view", {"rows": rows}, "\n".join(lines))


if __name__ == "__main__":
    main()
