"""The graph view widget: an anywidget whose ES modules (graph/*.js) need no build step and no
server; selection and view state sync to Python traits both ways.

The browser side is split by concern into graph/data.js, layout.js, draw.js, interact.js and
overlays.js, wired by the entry graph/index.js. anywidget takes one module text (``_esm``: the
entry); the others travel as texts in the ``modules`` trait and the entry imports each from a
blob: URL (see the comment at the top of index.js). The standalone page (:func:`write_html`)
runs the very same texts the same way."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ortlab.analysis.graphdata import GraphData, overview
from ortlab.core.errors import OrtlabWarning
from ortlab.views.render import csp_hash, esc, inline_script, script_json

__all__ = ["GraphView", "GraphWidget", "dagre_source", "module_sources"]

_JS = Path(__file__).parent / "graph"
COLOR_MODES = ("provider", "op_type", "time", "quant_error")
MODULES = ("data", "layout", "overlays", "labels", "draw", "interact")
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


class GraphView(anywidget.AnyWidget):  # type: ignore[misc,unused-ignore]  # untyped base
    """The model as an interactive graph: pan, zoom, hover, click; coloured by EP, op type,
    measured time or quantization error."""

    # The module's text, not its Path: anywidget watches a Path for hot reload through a
    # class-level signal that keeps every instance alive (a leak in a long Lab session).
    _esm = entry_source()
    data = traitlets.Dict().tag(sync=True)
    """The GraphData (ortlab.analysis.graphdata.graph_data) as a dict."""
    color_by = traitlets.Unicode("provider").tag(sync=True)
    """'provider', 'op_type', 'time' or 'quant_error'."""
    selected = traitlets.Dict().tag(sync=True)
    """The node last clicked in the browser (its row of the join), or {}."""
    expanded = traitlets.List(traitlets.Unicode()).tag(sync=True)
    """Scope groups shown open."""
    highlighted = traitlets.List(traitlets.Unicode()).tag(sync=True)
    """Node names drawn with a highlight outline."""
    dagre_src = traitlets.Unicode().tag(sync=True)
    modules = traitlets.Dict(value_trait=traitlets.Unicode()).tag(sync=True)
    """The texts of graph/data.js, layout.js, … by name: the entry imports them (no build step)."""
    _layout_ms = traitlets.Int(-1).tag(sync=True)
    """Last layout time measured in the browser (ms), -1 before the first."""

    def __init__(self, graph: GraphData, **kwargs: Any) -> None:
        unknown = set(kwargs) - {"color_by", "expanded", "highlighted"}
        if unknown:
            raise TypeError(
                f"GraphView got unexpected arguments {sorted(unknown)}; it takes color_by, "
                "expanded and highlighted."
            )
        super().__init__(
            data=graph.to_dict(),
            dagre_src=dagre_source(),
            modules=module_sources(),
            expanded=kwargs.pop("expanded", list(graph.expanded)),
            **kwargs,
        )

    @traitlets.validate("color_by")
    def _check_color(self, proposal: dict[str, Any]) -> str:
        value = str(proposal["value"])
        if value not in COLOR_MODES:
            raise traitlets.TraitError(
                f"color_by={value!r}: choose one of {', '.join(COLOR_MODES)}."
            )
        return value

    def select(self, name: str) -> None:
        """Select node ``name``: the view opens the groups around it, centres it and shows its
        details panel (op, attributes, inputs and outputs with shapes, EP and why, time)."""
        node = next((n for n in self.data["nodes"] if n["name"] == name), None)
        if node is None:
            import difflib

            close = difflib.get_close_matches(name, [n["name"] for n in self.data["nodes"]], 3)
            raise KeyError(f"{name!r} is not a node of this graph"
                           + (f"; did you mean {close[:3]}?" if close else ""))  # fmt: skip
        self.selected = dict(node)

    def overview(self) -> Any:
        """The picture as drawn now (the groups in ``expanded`` open), one row per item:
        name, kind ('group'/'node'), nodes, time_share, providers (see GraphData.overview)."""
        return overview(self.data, self.expanded)

    def highlight(self, nodes: Any) -> None:
        """Highlight nodes: names, or a table with a ``node`` column (``p.top_nodes(10)``)."""
        names = list(nodes["node"]) if hasattr(nodes, "columns") else [str(n) for n in nodes]
        known = {n["name"] for n in self.data["nodes"]}
        missing = [n for n in names if n not in known]
        self.highlighted = [n for n in names if n in known]
        if missing and self.highlighted:
            import warnings

            warnings.warn(
                f"{len(missing)} of {len(names)} names are not nodes of this graph (e.g. "
                f"{missing[:3]}): profile tables name ORT's optimized nodes; the placement "
                "join (placement.nodes) has the original names.",
                OrtlabWarning,
                stacklevel=2,
            )
        if missing and not self.highlighted:
            raise KeyError(
                f"None of {missing[:5]} is a node of this graph (profile tables name the "
                "optimized graph's nodes; use the placement join's original names)."
            )

    def to_html(self, path: str | Path) -> Path:
        """A self-contained HTML file (data, layout code and renderer inline; no network)."""
        return write_html(self.data, self.color_by, self.expanded, path, self.selected)


# No network and no inline script but the page's own: the module script is allowed by its
# sha256 hash (computed from its exact text, the embedded model data and module texts
# included), blob: is the entry module, the modules it imports and the layout worker, all
# made from those texts; styles are inline. Every model string
# is JSON data escaped by render.script_json, so even a missed escape would not run.
_CSP = (
    "default-src 'none'; script-src {hash} blob:; worker-src blob:; style-src 'unsafe-inline'; "
    "base-uri 'none'; form-action 'none'"
)

_MODULE = """
const state = {state};
const listeners = {{}};
const model = {{
  get: (k) => state[k],
  set: (k, v) => {{ state[k] = v; (listeners["change:" + k] || []).forEach((f) => f()); }},
  save_changes: () => {{}},
  on: (ev, f) => {{ (listeners[ev] = listeners[ev] || []).push(f); }},
}};
const source = {source};
const url = URL.createObjectURL(new Blob([source], {{ type: "text/javascript" }}));
const mod = await import(url);
await mod.default.render({{ model, el: document.getElementById("ortlab-root") }});
"""


def write_html(
    data: dict[str, Any],
    color_by: str,
    expanded: list[str],
    path: str | Path,
    selected: dict[str, Any] | None = None,
) -> Path:
    """The graph page: the widget's modules rendering ``data`` in a self-contained HTML file
    (opened on ``selected``, with its details, when given)."""
    module = page_module(data, color_by, expanded, selected)
    title = esc(f"ortlab: {data.get('model', 'model')}", 300)
    csp = _CSP.format(hash=csp_hash(module))
    page = (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        f"<title>{title}</title></head><body>\n"
        '<div id="ortlab-root"></div>\n'
        + inline_script(module, ' type="module"')
        + "</body></html>\n"
    )
    out = Path(path)
    out.write_text(page, encoding="utf-8")
    return out


def page_module(
    data: dict[str, Any],
    color_by: str,
    expanded: list[str],
    selected: dict[str, Any] | None = None,
) -> str:
    """The module script that renders the view into ``#ortlab-root`` of a page (the
    standalone graph page and the report): data, layout code and renderer as JSON text. A
    page's CSP must allow it by hash, plus ``blob:`` scripts and workers."""
    state = {
        "data": data,
        "color_by": color_by,
        "expanded": expanded,
        "highlighted": [],
        "selected": dict(selected or {}),
        "dagre_src": dagre_source(),
        "modules": module_sources(),
        "_layout_ms": -1,
    }
    return _MODULE.format(state=script_json(state), source=script_json(entry_source()))


GraphWidget = GraphView
"""The name before 0.2 (kept so saved notebooks keep working)."""
