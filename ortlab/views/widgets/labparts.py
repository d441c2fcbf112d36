"""The Lab's parts that are not the Lab: what a tab shows as a notebook output (without
IPython's display formatter), the tabs that draw when opened, the warm-up done while the worker
starts, and small helpers of its runs and files.
"""

from __future__ import annotations

import contextlib
import gc
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ipywidgets as w
import numpy as np

from ortlab.analysis.cost import cost
from ortlab.analysis.roofline import roofline
from ortlab.analysis.sweep import sweep
from ortlab.analysis.throughput import throughput
from ortlab.analysis.versions import version_diff
from ortlab.core.errors import OrtlabError
from ortlab.views.html import esc

__all__ = [
    "LIMITS_INTRO",
    "TAB_STYLE",
    "WAITING",
    "Shown",
    "carriers_first",
    "guess_hint",
    "limits_job",
    "median_shares",
    "mime_bundle",
    "optimizer_options",
    "ort_seconds",
    "safe_filename",
    "set_outputs",
    "snapshot_html",
    "top_node_options",
    "warm_up",
]


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

LIMITS_INTRO = (
    "<div style='max-width:900px'>Is each node near what this machine can do? The <b>roofline</b> "
    "measures this machine's peaks with ORT under the current settings (a large GEMM per "
    "precision, streaming Adds) and sets each node's measured time against the FLOPs and bytes "
    "its shapes imply (<b>cost</b>: computed). <b>Throughput</b>: requests/s with 1, 2 and 4 at "
    "once. <b>Sweep</b>: latency, placement and memory per shape. <b>Versions</b>: the model "
    "under two onnxruntime versions, node by node (each installed once from PyPI).</div>"
)


def _sweep_dims(text: str) -> dict[str, list[int]]:
    """``batch=1,2,4; sequence=64,128`` as sweep dims (an ortlab error says what is wrong)."""
    dims: dict[str, list[int]] = {}
    for part in (p.strip() for p in text.split(";") if p.strip()):
        name, _, values = part.partition("=")
        try:
            dims[name.strip()] = [int(v) for v in values.split(",") if v.strip()]
        except ValueError:
            dims[name.strip()] = []
        if not name.strip() or not dims[name.strip()]:
            raise OrtlabError(f"shapes: {part!r} is not name=int,int,… (e.g. batch=1,2,4).")
    if not dims:
        raise OrtlabError("shapes: type the dims to sweep, e.g. batch=1,2,4; sequence=64,128.")
    return dims


def _perfetto(lab: Any) -> tuple[Path, list[Any]]:
    """The last run's profile as a Perfetto trace in the working directory (slices named after
    the model's nodes through the run's placement join), like the HTML report button."""
    if lab.placement is None or lab.placement.profile is None:
        raise OrtlabError("No run to export yet: press Run, then save its trace.")
    out = Path.cwd() / f"ortlab-trace-{safe_filename(lab.model.name)}.json"
    lab.placement.profile.to_perfetto(out, placement=lab.placement, model=lab.model)
    note = (
        f"<div>Perfetto trace of the last run written: <b>{esc(out)}</b> "
        f"({out.stat().st_size / 1e6:.1f} MB). Open it at ui.perfetto.dev or "
        "chrome://tracing (File: open trace file).</div>"
    )
    return out, [w.HTML(note)]


def limits_job(what: str, lab: Any) -> tuple[Any, list[Any]]:
    """Run one of the Limits tab's jobs at the Lab's settings and inputs: the result, and
    what the tab shows (its figure, then the result's own table: one home for each number).
    Each job runs the Model the run used (its own name in every title, not its file's stem)
    under the Lab's config: the cost counts the graph the roofline beside it times."""
    path, config, inputs, progress = lab._current, lab.config, lab._inputs(), lab._progress(what)
    shapes, versions = lab.tab_controls.sweep_dims.value, lab.tab_controls.versions.value
    result: Any
    if what == "perfetto":
        return _perfetto(lab)
    if what == "roofline":
        result = roofline(path, config, runs=10, progress=progress, **inputs)
    elif what == "cost":
        result = cost(path, config=config, progress=progress, **inputs)
    elif what == "throughput":
        result = throughput(path, config, concurrency=[1, 2, 4], progress=progress, **inputs)
    elif what == "sweep":
        result = sweep(path, _sweep_dims(shapes), config, progress=progress)
    else:
        pair = [v.strip() for v in versions.split(",") if v.strip()]
        if len(pair) != 2:
            raise OrtlabError(
                f"versions: give two onnxruntime versions, e.g. 1.31.1,1.32.0 (got {versions!r})."
            )
        result = version_diff(path, config, versions=pair, progress=progress, **inputs)
    return result, [result.plot(), result]


def median_shares(prof: Any) -> Any:
    """Per node: op_type, median_us and share as :meth:`ProfileResult.by_node` defines them
    (the node's median run, profiling on; share of the median run), slowest first."""
    t = prof.by_node()
    return t[["node", "op_type", "us_per_run", "share"]].rename(columns={"us_per_run": "median_us"})


def warm_up(model: Any) -> None:
    """What the first run would otherwise do cold, done while the worker process starts
    (its interpreter and onnxruntime's import take ~0.45 s, and the first run waits for them):
    build and serialise one small figure of every kind the Lab shows, so that plotly's lazy
    imports (trace classes, their validators) happen now; type the model's tensors; read the
    graph view's scripts. Then a full garbage collection: the objects the imports and the
    widgets made (tens of thousands) would otherwise set one off (~0.08 s with pandas and plotly
    loaded) inside the first run; it belongs to the construction, whose time includes it.

    Done here, before the first run, not on a thread during it: nothing of ortlab's may take
    a core while ORT's runs are being timed. Only a head start: a failure here changes
    nothing (each step is done again, and reports its error, where it is needed)."""
    from ortlab.analysis.graphdata import tensor_types
    from ortlab.views.graph.page import dagre_source, module_sources

    for step in (_warm_figure, lambda: tensor_types(model), dagre_source, module_sources):
        with contextlib.suppress(Exception):  # an optimisation must never surface
            step()
    gc.collect()


def _warm_figure() -> None:
    """One figure with the traces and the properties the Lab's figures set: plotly builds a
    validator per property on first use."""
    import pandas as pd
    import plotly.graph_objects as go

    from ortlab.views.figure import template

    one, text = np.ones(1), np.array(["a"])
    fig = go.Figure()
    fig.add_bar(
        x=pd.Series(one),
        y=text,
        base=one,
        orientation="h",
        name="a",
        customdata=text,
        text=text,
        marker_color="#bbb",
        opacity=0.6,
        hovertemplate="%{x}",
    )
    fig.add_scatter(
        x=one,
        y=one,
        mode="lines+markers",
        name="a",
        text=text,
        line={"dash": "dot", "shape": "hv"},
        marker={"size": 4},
        error_x={"type": "data", "array": [0.1]},
        hovertemplate="%{y}",
    )
    fig.add_trace(go.Histogram(x=one, nbinsx=10, name="a"))
    fig.add_trace(
        go.Sunburst(
            ids=text,
            labels=text,
            parents=np.array([""]),
            values=one,
            branchvalues="total",
            maxdepth=2,
            hovertemplate="%{label}",
        )
    )
    fig.add_trace(go.Treemap(ids=["a"], labels=["a"], parents=[""], values=[1]))
    fig.update_layout(
        title={"text": "warm-up", "x": 0.01},
        template=template(),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        barmode="overlay",
        height=300,
        xaxis_title="x",
        yaxis_title="y",
        legend_title="l",
        showlegend=False,
        shapes=[{"type": "line", "x0": 1, "x1": 1, "y0": 0, "y1": 1}],
        annotations=[{"x": 1, "y": 1, "text": "a", "showarrow": False}],
    )
    fig.add_vline(x=1.0, line_dash="dot")
    mime_bundle(fig)


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

    def __missing__(self, pane: str) -> list[Any]:
        if self._draw(pane):
            return list(dict.__getitem__(self, pane))
        raise KeyError(pane)


def set_outputs(out: w.Output, items: Any) -> None:
    """Replace an Output widget's content (thread-safe: no ``with out:`` capture)."""
    out.outputs = tuple(
        {"output_type": "display_data", "data": mime_bundle(item), "metadata": {}} for item in items
    )


def mime_bundle(item: Any) -> dict[str, Any]:
    """What a notebook would display for ``item``, built without IPython's display formatter:
    that formatter also appends every output to the shell's history (``HistoryOutput``) for the
    running cell, so a Lab refreshing from one cell would keep every old figure (~50 KB each)."""
    data: dict[str, Any] = {}
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


def _is_figure(item: Any) -> bool:
    # no figure exists before plotly is imported: a table or a widget does not import it
    base = getattr(sys.modules.get("plotly.basedatatypes"), "BaseFigure", None)
    return base is not None and isinstance(item, base)


def _figure_bundle(fig: Any) -> dict[str, Any]:
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


def ort_seconds(pl: Any, b: Any) -> float:
    """ORT's own time in a refresh, as the worker timed its calls: both session builds (the
    benchmark's only if not reused), every run of both, warm-up included, and end_profiling."""
    if pl.ort_ms is None or b.ort_ms is None:  # not measured: no overhead to state
        return float("nan")
    return float(pl.ort_ms + b.ort_ms) / 1e3


def safe_filename(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]


def snapshot_html(
    model_name: str,
    settings: str,
    history: Any,
    *,
    benchmark: Any,
    placement: Any,
    profile: Any,
    failed: bool = False,
) -> str:
    """A Lab's state as plain HTML (no script, no network): the settings and shapes of the
    last run, its latency with interval and load, where its nodes ran, the slowest nodes, and
    the History. Each figure is the one its tab shows (the same renderers)."""
    from ortlab.views.html import esc, table_html
    from ortlab.views.render import profile_node_rows

    head = (
        f"<div><b>ortlab Lab</b> · {esc(model_name)} · a static snapshot of the last "
        "run (the live Lab needs a running kernel: open this notebook in JupyterLab)</div>"
    )
    if benchmark is None or placement is None:
        return head + f"<div>{'the last run failed' if failed else 'no run yet'}</div>"
    rec = history.records[-1] if history.records else None
    shapes = f" · {esc(rec.shapes)}" if rec and rec.shapes else ""
    parts = [
        head,
        f"<div>settings: {esc(settings)}{shapes}</div>",
        "<h4>Benchmark</h4>",
        benchmark._repr_html_(),
        "<h4>Placement</h4>",
        placement._repr_html_(),
    ]
    if profile is not None:  # the Profile tab's and the report's table of the slowest nodes
        rows = profile_node_rows(profile, 10, carriers_first(placement, profile))
        parts += [
            f"<h4>Slowest nodes</h4><div>over {profile.runs} profiled runs</div>",
            table_html(*rows),
        ]
    t = history.to_pandas()[
        ["run", "label", "p50_ms", "p50_low_ms", "p50_high_ms", "other_cores", "providers"]
    ].tail(10)
    parts += [
        "<h4>History</h4>",
        t.to_html(index=False, float_format="{:.3f}".format, classes="ortlab-t", border=0),
    ]
    return "<div class='ortlab-lab-snapshot'>" + "".join(parts) + "</div>"


def optimizer_options(report: Any, chosen: tuple[str, ...]) -> list[tuple[str, str]]:
    """The optimizers box: ``chosen`` switched off (ORT then does not list them), then the
    transformers the last session ran (``report``), those that changed the graph first (with
    how often)."""
    fired = sorted(report.fired.items(), key=lambda kv: (-kv[1], kv[0])) if report else []
    quiet = sorted(set(report.transformers) - set(report.fired) - set(chosen)) if report else []
    options = [(f"{n} (off)", n) for n in chosen]
    options += [(f"{n} (fired {k}×)", n) for n, k in fired if n not in chosen]
    return options + [(n, n) for n in quiet]


def top_node_options(prof: Any, placement: Any) -> list[tuple[str, str]]:
    """The Profile tab's slowest nodes (25), each kernel named by the original nodes it
    computes (the one that carries its time first), with its median time and share
    (``ProfileResult.by_node``'s, as everywhere)."""
    from ortlab.views.render import kernel_label

    fused = carriers_first(placement, prof)
    return [
        (
            f"{kernel_label(r.node, fused.get(r.node, []))} · {r.op_type} · {r.median_us:.0f} µs"
            f" · {r.share:.1%}",
            r.node,
        )
        for r in median_shares(prof).head(25).itertuples()
    ]


def carriers_first(placement: Any, profile: Any) -> dict[str, tuple[str, ...]]:
    """Per kernel, the original nodes it computes (:func:`fused_map`), the one that carries
    its time in the placement join first (``NodeRow.us_per_run``): the Conv of a Conv+Relu
    kernel, not the Relu "fused into" it with no time of its own."""
    from ortlab.views.render import fused_map

    fused = fused_map(placement, profile)
    if not fused:
        return {}
    time = {r.node: r.us_per_run for r in placement.node_rows}
    return {k: tuple(sorted(v, key=lambda n: -time.get(n, 0.0))) for k, v in fused.items()}


def guess_hint(err: Exception, auto_dims: dict[str, int]) -> str:
    """For a run that failed at shapes ortlab guessed (any tab's verb): which dims were
    guessed and how to set them, unless the error says it already."""
    from ortlab.core.errors import RunError

    if not isinstance(err, RunError) or "guessed" in str(err) or not auto_dims:
        return ""
    guessed = "; ".join(f"{n}={v}" for n, v in auto_dims.items())
    return (
        f" These dims were chosen by ortlab ({guessed}), not given: type the model's real "
        "sizes in the dims box (or Lab(model, dims=…))."
    )
