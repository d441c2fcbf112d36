"""The Lab through its state (no browser): controls trigger runs, views update, errors land in
the error panel with the previous results kept, history compares runs."""

from __future__ import annotations

import pytest

import ortlab


@pytest.fixture
def lab(mlp: ortlab.Model):
    return ortlab.Lab(mlp, synchronous=True, runs=10)


def test_first_run_fills_the_tabs(lab) -> None:
    assert len(lab.history) == 1 and lab.error.value == ""
    assert isinstance(lab.shown["Benchmark"][0], ortlab.BenchmarkResult)
    assert isinstance(lab.shown["Placement"][0], ortlab.PlacementResult)
    assert type(lab.shown["Graph"][0]).__name__ == "GraphWidget"
    assert len(lab.shown["Profile"]) == 5  # op types, EP sunburst, timeline, top nodes
    assert lab.config.level == "all" and lab.config.providers == ("CPUExecutionProvider",)


def test_controls_rerun_and_history_compares(lab) -> None:
    lab.level.value = "disabled"
    lab.intra.value = 1
    t = lab.history.to_pandas()
    assert t["label"].tolist() == ["cpu · all", "cpu · disabled", "cpu · disabled · intra=1"]
    cmp = lab.history.compare(1, 3)
    assert cmp["metric"].tolist() == ["p50_ms", "p90_ms", "mean_ms"]
    assert lab.shown["Benchmark"][0].session_config.intra_op_threads == 1


def test_variant_control_builds_and_runs_it(lab) -> None:
    lab.variant.value = "dynamic int8"
    b = lab.shown["Benchmark"][0]
    assert "dynamic int8" in b.model
    assert lab.history.to_pandas()["variant"].tolist()[-1] == "dynamic int8"


def test_errors_show_in_the_lab_and_keep_results(lab) -> None:
    before = lab.shown["Benchmark"][0]
    lab.dims.value = "batch=x"
    lab.run()
    assert "not name=integer" in lab.error.value
    assert lab.shown["Benchmark"][0] is before and len(lab.history) == 1
    lab.dims.value = "batch=2"
    lab.run()
    assert lab.error.value == "" and len(lab.history) == 2


def test_unloadable_providers_are_disabled_with_the_reason(lab) -> None:
    import onnxruntime as ort

    for ep, box in lab.provider_boxes.items():
        if ep != "CPUExecutionProvider" and ep in ort.get_available_providers():
            assert box.disabled
            assert "cannot load here" in box.tooltip


def test_snippet(lab) -> None:
    lab.snippet_button.click()
    assert "ort.InferenceSession" in lab.notice.value


def test_top_node_row_selects_it_in_the_graph(lab) -> None:
    label, node = lab.top_nodes.options[0]
    lab.top_nodes.value = node
    fused = {r.node: r.fused_from for r in lab.placement.optimized_rows}
    assert lab.graph.selected["name"] in (fused.get(node) or [node])
    assert set(lab.graph.highlighted) <= set(fused.get(node) or [node])
    assert lab.tabs.selected_index == list(lab.panes).index("Graph")
    assert node in label


def test_history_picks_two_runs_and_snippets_one(lab) -> None:
    lab.spinning.value = "off"
    assert lab.history.to_pandas()["label"].tolist()[-1] == "cpu · all · no-spin"
    assert (lab.run_a.value, lab.run_b.value) == (1, 2)
    lab.compare_button.click()
    table = lab.shown["History comparison"][0]
    assert list(table.columns) == ["metric", "run 1", "run 2", "delta", "ratio"]
    lab.run_snippet_button.click()
    assert "(run 1)" in lab.notice.value and "ort.InferenceSession" in lab.notice.value
    assert "overhead_s" in lab.history.to_pandas().columns


def test_doctor_tab_and_apply_best(lab) -> None:
    lab.level.value = "disabled"
    lab.budget.value = 10
    lab.doctor_button.click()
    d = lab.doctor_result
    assert isinstance(d, ortlab.DoctorResult) and lab.shown["Doctor"][1] is d
    assert any(f.rule == "optimization_level" for f in d.findings)
    runs = len(lab.history)
    lab.apply_button.click()
    assert len(lab.history) == runs + 1  # one run for the whole change, not one per control
    best = d.best.session_config
    assert (lab.config.level, lab.config.intra_op_threads) == (best.level, best.intra_op_threads)


def test_export_report_of_the_lab_state(lab, tmp_path) -> None:
    out = lab.export_report(tmp_path / "lab.html")
    text = out.read_text()
    assert "Placement: where each node runs" in text and "History" in text
    assert "Benchmark" in text and str(out) in lab.notice.value


def test_refreshes_do_not_accumulate_widgets(lab) -> None:
    """Each refresh replaces the graph widget; the old one is closed, not left in the kernel's
    widget registry (benchmarks/soak.py runs 500 refreshes and records the memory)."""
    from ipywidgets.widgets.widget import _instances  # noqa: TID251 - the registry itself

    lab.level.value = "basic"
    lab.level.value = "all"
    before = len(_instances)
    for level in ("disabled", "basic", "extended", "all") * 3:
        lab.level.value = level
    assert len(_instances) == before
    assert len(lab.history) == 15


def test_outputs_bypass_ipython_history_and_old_results_are_dropped(lab) -> None:
    """IPython's display formatter appends every output to the running cell's history; the Lab
    builds its bundles itself, and keeps full results only for the most recent runs."""
    import gc

    for level in ("disabled", "basic", "extended", "all") * 3:
        lab.level.value = level
    gc.collect()
    bundles = [o for o in gc.get_objects()
               if isinstance(o, dict) and "application/vnd.plotly.v1+json" in o]  # fmt: skip
    assert len(bundles) <= 5  # the figures on screen now (op types, EPs, timeline, ...)
    kept = [r for r in lab.history.records if r.placement is not None]
    assert len(kept) == lab.history.keep_results and kept[-1] is lab.history.records[-1]
