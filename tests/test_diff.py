"""Run against run, per node: checked against the placements' own tables and the interval's
coverage by simulation."""

from __future__ import annotations

import numpy as np
import pytest

import ortlab
from ortlab.core.stats import shift_interval


def test_shift_interval_covers_what_it_claims() -> None:
    rng = np.random.default_rng(1)
    hits = claimed = 0.0
    trials = 3000
    for _ in range(trials):
        a = rng.lognormal(3, 0.2, 6)
        b = rng.lognormal(3, 0.2, 6) + 4.0  # a true shift of 4
        _, low, high, coverage = shift_interval(a, b)
        hits += low <= 4.0 <= high
        claimed = coverage
    assert claimed >= 0.95
    assert hits / trials >= claimed - 0.015, (hits / trials, claimed)
    assert np.isnan(shift_interval([1, 2, 3], [4, 5, 6])[1]), "3 runs a side: no 95 % interval"


@pytest.fixture(scope="module")
def runs() -> tuple[ortlab.PlacementResult, ortlab.PlacementResult]:
    m = ortlab.examples.load("squeezenet")
    a = ortlab.placement(m, {"level": "disabled"}, runs=6, progress=False)
    b = ortlab.placement(m, {"level": "all"}, runs=6, progress=False)
    return a, b


def test_a_run_against_itself_has_no_difference(runs: tuple[ortlab.PlacementResult, ...]) -> None:
    a, _ = runs
    d = ortlab.diff(a, a)
    verdicts = set(d.nodes["verdict"]) - {"not timed"}
    assert verdicts == {"no measurable difference"}
    assert d.summary()["moved_ep"] == 0 and d.summary()["kernel_changed"] == 0
    assert d.run_ratio == 1.0


def test_levels_differ_per_node_as_the_joins_say(runs: tuple[ortlab.PlacementResult, ...]) -> None:
    a, b = runs
    d = ortlab.diff(a, b)
    t = d.nodes.set_index("node")
    ja = a.nodes.set_index("node")
    for node in t.index:
        # kernels from each join's own optimized table
        ka = "+".join(
            dict.fromkeys(a.optimized.set_index("node").loc[ja.loc[node, "optimized"], "op_type"])
        )
        assert t.loc[node, "a_kernel"] == ka
    relu = t[t["op_type"] == "Relu"]
    assert relu["kernel_changed"].all(), "at level all every Relu is fused into its Conv"
    assert (relu["b_us"] == 0).all() and (relu["verdict"] == "faster").sum() >= len(relu) // 2
    timed = t[t["verdict"].isin(["slower", "faster"])]
    assert ((timed["low"] <= timed["delta_us"]) & (timed["delta_us"] <= timed["high"])).all()
    # a node's per-run times are the join's attribution run by run: never more than the
    # slowest run could hold, never negative (no timing threshold: the suite runs under load)
    assert a.profile is not None
    assert (t["a_us"] >= 0).all() and (t["a_us"] <= max(a.profile.data.run_us)).all()
    g = ortlab.graph(ortlab.examples.load("squeezenet"), placement=b, diff=d)
    assert g.color_by == "diff" and any(n.delta_us for n in g.graph_data.nodes)
    assert "<table" in d._repr_html_() and d.plot() is not None


def test_diff_needs_measured_placements() -> None:
    with pytest.raises(TypeError, match="two ortlab.placement"):
        ortlab.diff("a", "b")  # type: ignore[arg-type]


def test_verdict_colours_have_one_home() -> None:
    """A verdict is one colour in every chart and on the graph (views.colors.VERDICT_COLORS,
    carried to the graph's JS in its palette): the words and sentences map to it."""
    from ortlab.views.colors import VERDICT_COLORS, palette, verdict_color

    assert verdict_color("slower") == VERDICT_COLORS["slower"]
    assert (
        verdict_color("all is 1.39x faster than disabled: time ratio …")
        == (VERDICT_COLORS["faster"])
    )
    for quiet in (
        "no measurable difference",
        "within noise",
        "basic is faster than disabled, perhaps by no more than the ±2% noise",
        "too few runs",
    ):
        assert verdict_color(quiet) == VERDICT_COLORS["neither"], quiet
    assert palette()["verdicts"] == VERDICT_COLORS
