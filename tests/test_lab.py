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
    assert len(lab.shown["Profile"]) == 4
    assert lab.config.level == "all" and lab.config.providers == ("CPUExecutionProvider",)


def test_controls_rerun_and_history_compares(lab) -> None:
    lab.level.value = "disabled"
    lab.intra.value = 1
    t = lab.history.to_pandas()
    assert t["label"].tolist() == ["cpu · all", "cpu · disabled", "cpu · disabled · intra=1"]
    cmp = lab.history.compare(0, 2)
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
