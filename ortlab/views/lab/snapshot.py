"""The Lab as a static snapshot: plain HTML of its last run and History, for a notebook opened
without a kernel."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortlab.views.lab.kernelnodes import carriers_first

if TYPE_CHECKING:
    from ortlab.analysis.benchmark import BenchmarkResult
    from ortlab.analysis.placement.result import PlacementResult
    from ortlab.analysis.profiling import ProfileResult
    from ortlab.views.lab.history import History

__all__ = ["snapshot_html"]


def snapshot_html(
    model_name: str,
    settings: str,
    history: History,
    *,
    benchmark: BenchmarkResult | None,
    placement: PlacementResult | None,
    profile: ProfileResult | None,
    failed: bool = False,
) -> str:
    """A Lab's state as plain HTML (no script, no network): the settings and shapes of the
    last run, its latency with interval and load, where its nodes ran, the slowest nodes, and
    the History. Each figure is the one its tab shows (the same renderers)."""
    from ortlab.views.html import esc, table_html
    from ortlab.views.profile import profile_node_rows

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
