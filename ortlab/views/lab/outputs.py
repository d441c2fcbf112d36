"""What the Lab's tabs show, as notebook outputs: the CSS of its tab bar, lists and tables; an
item's MIME bundle (built without IPython's display formatter, a figure without plotly's
renderer module); an Output widget's content replaced; the tabs that draw when opened.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import plotly.graph_objects as go

import ipywidgets as w

__all__ = ["TAB_STYLE", "WAITING", "Shown", "mime_bundle", "set_outputs"]


TAB_STYLE = (
    "<style>.ortlab-lab .jupyter-widgets.jupyter-widget-tab > .lm-TabBar .lm-TabBar-tab"
    "{flex:0 0 auto;padding:0 9px}"
    ".ortlab-lab select{min-width:0;max-width:100%;overflow-x:hidden;text-overflow:ellipsis}"
    ".ortlab-lab .widget-select,.ortlab-lab .widget-select-multiple{min-width:0;max-width:100%}"
    ".ortlab-lab .jp-RenderedHTMLCommon td,.ortlab-lab .jp-RenderedHTMLCommon th"
    "{white-space:normal;overflow-wrap:break-word}</style>"
)
"""Each tab as wide as its name (ipywidgets gives every tab 144 px, and ten tabs then squeeze
their names at 1280 px); a list as wide as its column, however long its options (a select
sizes itself to its longest option, and a node's name pushed the column into a sideways
scrollbar); table cells wrap, so a long label never widens a table past the Lab."""


WAITING = {
    "output_type": "display_data",
    "data": {"text/html": "<i>drawing the latest run…</i>", "text/plain": "drawing…"},
    "metadata": {},
}
"""A tab a run left waiting shows this until it is opened (never the previous run)."""


class Shown(dict):  # type: ignore[type-arg]
    """``Lab.shown``: what each tab shows; looking a waiting tab up draws it first."""

    def __init__(self, draw: Callable[[str], bool]) -> None:
        super().__init__()
        self._draw = draw

    def __missing__(self, pane: str) -> list[object]:
        if self._draw(pane):
            return list(dict.__getitem__(self, pane))
        raise KeyError(pane)


def set_outputs(out: w.Output, items: Iterable[object]) -> None:
    """Replace an Output widget's content (thread-safe: no ``with out:`` capture)."""
    out.outputs = tuple(
        {"output_type": "display_data", "data": mime_bundle(item), "metadata": {}} for item in items
    )


def mime_bundle(item: object) -> dict[str, object]:
    """What a notebook would display for ``item``, built without IPython's display formatter:
    that formatter also appends every output to the shell's history (``HistoryOutput``) for the
    running cell, so a Lab refreshing from one cell would keep every old figure (~50 KB each)."""
    data: dict[str, object] = {}
    if _is_figure(item):
        return _figure_bundle(item)
    if hasattr(item, "_repr_mimebundle_"):
        got = item._repr_mimebundle_()
        data = dict(got[0] if isinstance(got, tuple) else got or {})
    if "text/html" not in data and hasattr(item, "_repr_html_"):
        html = item._repr_html_()
        if html:
            data["text/html"] = html
    data.setdefault("text/plain", repr(item))
    return data


def _is_figure(item: object) -> bool:
    # no figure exists before plotly is imported: a table or a widget does not import it
    base = getattr(sys.modules.get("plotly.basedatatypes"), "BaseFigure", None)
    return base is not None and isinstance(item, base)


def _figure_bundle(fig: go.Figure) -> dict[str, object]:
    """The bundle plotly's renderer gives a figure in a JupyterLab kernel ("plotly_mimetype":
    the figure as JSON, drawn by the jupyterlab-plotly extension), made here without its
    renderer module: importing that pulls in nbformat and jsonschema, whose IRI checker builds
    a grammar on import (~1 s in a fresh kernel, and ~65,000 objects every later garbage
    collection walks)."""
    from plotly.io import to_json

    title = fig.layout.title.text or "figure"
    return {
        "application/vnd.plotly.v1+json": json.loads(to_json(fig, remove_uids=False)),
        "text/plain": f"<plotly figure: {title}>",
    }
