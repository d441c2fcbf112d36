"""The graph view's page parts, without any UI library: the ES module texts (graph/*.js,
shipped beside this module), netron's dagre, and the module script that
renders the view into a page's ``#ortlab-root`` — used by the standalone page
(:func:`write_html`), the report, and the widget (:mod:`ortlab.views.graph.widget`)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

from ortlab.views.html import csp_hash, esc, inline_script, script_json

__all__ = [
    "MODULES",
    "STATE_ID",
    "dagre_source",
    "entry_source",
    "module_sources",
    "page_module",
    "state_block",
    "write_html",
]

_JS = Path(__file__).parent  # the ES modules live beside this file
COLOR_MODES = ("provider", "op_type", "time", "quant_error", "memory", "diff", "roofline")
MODULES = ("wire", "data", "layout", "overlays", "labels", "draw", "interact")
"""The modules the entry (graph/index.js) imports, by name (graph/<name>.js)."""


@functools.cache
def dagre_source() -> str:
    """netron's standalone dagre layout module, loaded from the installed package."""
    import netron

    path = Path(netron.__file__).parent / "dagre.js"
    return path.read_text(encoding="utf-8")


@functools.cache
def entry_source() -> str:
    """graph/index.js: the ES module anywidget loads (``_esm``) and the standalone page runs."""
    return (_JS / "index.js").read_text(encoding="utf-8")


@functools.cache
def _module_texts() -> tuple[tuple[str, str], ...]:
    return tuple((name, (_JS / f"{name}.js").read_text(encoding="utf-8")) for name in MODULES)


def module_sources() -> dict[str, str]:
    """The texts of the modules the entry imports, by name (read once; a fresh dict)."""
    return dict(_module_texts())


# No network and no inline script but the page's own: the module script is allowed by its
# sha256 hash, blob: is the entry module, the modules it imports and the layout worker, all
# made from the texts in the state block; styles are inline. Every model string is JSON data
# escaped by html.script_json, in a data block that never runs.
_CSP = (
    "default-src 'none'; script-src {hash} blob:; worker-src blob:; style-src 'unsafe-inline'; "
    "base-uri 'none'; form-action 'none'"
)

STATE_ID = "ortlab-graph-state"
"""The id of the page's data block (``<script type="application/json">``) holding the view's
state: the packed graph, the colour mode, the open groups, the layout and renderer texts."""

# The state travels as a data block, not inside the module: the browser's HTML parser reads
# a data block about twice as fast as it parses the same JSON as a script's object literal,
# and JSON.parse is faster again (50,000 nodes: ~340 ms to the first paint, against ~530 ms
# as a literal). A data block never runs, so the CSP needs no hash for it; the module is the
# same text for every graph.
_MODULE = """
const state = JSON.parse(document.getElementById("STATE_ID").textContent);
const listeners = {};
const model = {
  get: (k) => state[k],
  set: (k, v) => { state[k] = v; (listeners["change:" + k] || []).forEach((f) => f()); },
  save_changes: () => {},
  on: (ev, f) => { (listeners[ev] = listeners[ev] || []).push(f); },
};
const url = URL.createObjectURL(new Blob([state.entry], { type: "text/javascript" }));
const mod = await import(url);
await mod.default.render({ model, el: document.getElementById("ortlab-root") });
""".replace("STATE_ID", STATE_ID)


def write_html(
    data: Mapping[str, object],
    color_by: str,
    expanded: list[str],
    path: str | Path,
    selected: Mapping[str, object] | None = None,
) -> Path:
    """The graph page: the widget's modules rendering ``data`` (``pack(graph)``) in a
    self-contained HTML file (opened on ``selected``, with its details, when given)."""
    title = esc(f"ortlab: {data.get('model', 'model')}", 300)
    csp = _CSP.format(hash=csp_hash(page_module()))
    page = (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        f"<title>{title}</title></head><body>\n"
        '<div id="ortlab-root"></div>\n'
        + state_block(data, color_by, expanded, selected)
        + inline_script(page_module(), ' type="module"')
        + "</body></html>\n"
    )
    out = Path(path)
    out.write_text(page, encoding="utf-8")
    return out


def state_block(
    data: Mapping[str, object],
    color_by: str,
    expanded: list[str],
    selected: Mapping[str, object] | None = None,
) -> str:
    """The data block :func:`page_module` renders from: ``data`` (``pack(graph)``),
    the view state, layout code and renderer, as inert JSON (every model string escaped by
    html.script_json, so not even a missed escape could end the element or run)."""
    state = {
        "data": data,
        "color_by": color_by,
        "expanded": expanded,
        "highlighted": [],
        "selected": dict(selected or {}),
        "dagre_src": dagre_source(),
        "modules": module_sources(),
        "entry": entry_source(),
        "_layout_ms": -1,
    }
    return f'<script type="application/json" id="{STATE_ID}">{script_json(state)}</script>\n'


def page_module() -> str:
    """The module script that renders the view into ``#ortlab-root`` from the page's
    :func:`state_block` (the standalone graph page and the report). The same text for every
    graph: a page's CSP allows it by its hash, plus ``blob:`` scripts and workers."""
    return _MODULE
