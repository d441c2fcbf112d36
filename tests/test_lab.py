"""The Lab through its state (no browser): controls trigger runs, views update, errors land in
the error panel with the previous results kept, history compares runs."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import ortlab
from ortlab.core.config import SessionConfig
from ortlab.core.units import fmt_interval


@pytest.fixture
def lab(mlp: ortlab.Model):
    return ortlab.Lab(mlp, synchronous=True, runs=10)


def test_first_run_fills_the_tabs(lab) -> None:
    assert len(lab.history) == 1 and lab.error.value == ""
    assert isinstance(lab.shown["Benchmark"][0], ortlab.BenchmarkResult)
    assert isinstance(lab.shown["Placement"][1], ortlab.PlacementResult)  # [0]: what-if bar
    assert isinstance(lab.shown["Graph"][0], ortlab.GraphView)
    assert len(lab.shown["Profile"]) == 6  # top nodes (caption, list), then op types, EP sunburst,
    # timeline, memory
    assert lab.config.level == "all" and lab.config.providers == ("CPUExecutionProvider",)


def test_controls_rerun_and_history_compares(lab) -> None:
    lab.level.value = "disabled"
    lab.intra.value = 1
    t = lab.history.to_pandas()
    assert t["label"].tolist() == [
        "cpu · all · dims batch=1",
        "cpu · disabled · dims batch=1",
        "cpu · disabled · intra=1 · dims batch=1",
    ]
    cmp = lab.history.compare(1, 3)
    assert cmp["metric"].tolist() == [
        "p50_ms",
        "p90_ms",
        "mean_ms",
        "profiled_run_ms",
        "other_cores",
    ]
    one, three = lab.history.run(1), lab.history.run(3)
    assert cmp.loc[3, "run 3"] == three.placement.profile.median_run_ms
    assert cmp.loc[4, "run 1"] == one.other_cores
    assert lab.shown["Benchmark"][0].config.intra_op_threads == 1


def test_variant_control_builds_and_runs_it(lab) -> None:
    lab.variant.value = "dynamic int8"
    b = lab.shown["Benchmark"][0]
    assert "dynamic int8" in b.model
    assert lab.history.to_pandas()["variant"].tolist()[-1] == "dynamic int8"


def test_errors_show_in_the_lab_and_keep_results(lab) -> None:
    before = lab.shown["Benchmark"][0]
    lab.dims.value = "batch=x"  # as on Enter: the box re-runs when its value arrives
    assert "not name=integer" in lab.error.value and "Previous results are kept" in lab.error.value
    assert lab.shown["Benchmark"][0] is before and len(lab.history) == 1
    lab.dims.value = "batch=2"
    assert lab.error.value == "" and len(lab.history) == 2


def test_unloadable_providers_are_disabled_with_the_reason(lab) -> None:
    """A box is enabled exactly where a trial session loaded its EP (OpenVINO where its
    plugin lists a device, an Intel CPU); every disabled one says why (cannot load here, or
    a plugin's meta-device that a config does not name)."""
    import onnxruntime as ort

    loadable = ortlab.providers().loadable
    for ep, box in lab.provider_boxes.items():
        if ep != "CPUExecutionProvider" and ep in ort.get_available_providers():
            assert box.disabled == (ep not in loadable), ep
            if box.disabled:
                assert "cannot load here" in box.tooltip or "meta-device" in box.tooltip, ep


def test_snippet(lab) -> None:
    lab.snippet_button.click()
    assert "ort.InferenceSession" in lab.notice.value


def test_top_node_row_selects_it_in_the_graph(lab) -> None:
    lab.tabs.selected_index = list(lab.panes).index("Profile")  # the list is in that tab
    label, node = lab.top_nodes.options[0]
    lab.top_nodes.value = node
    fused = {r.node: r.fused_from for r in lab.placement.optimized_rows}
    assert lab.graph.selected["name"] in (fused.get(node) or [node])
    assert set(lab.graph.highlighted) <= set(fused.get(node) or [node])
    assert lab.tabs.selected_index == list(lab.panes).index("Graph")
    assert node in label


def test_spinning_bounded_in_time_is_a_choice_and_the_benchmark_says_it(mlp) -> None:
    """Where the runtime has time-bounded spinning the Lab offers it beside on and off; a run
    with it is built with the entry onnxruntime reads and its benchmark says which spinning
    it used."""
    from ortlab.core.runtime import TIMED_SPIN_US, has_timed_spin

    lab = ortlab.Lab(mlp, synchronous=True, runs=5)
    if not has_timed_spin():
        assert len(lab.spinning.options) == 3
        return
    assert "spinning: the runtime's default" in lab.benchmark_result.to_text()
    bounded = f"≤{TIMED_SPIN_US} µs"
    assert bounded in lab.spinning.options
    lab.spinning.value = bounded
    b = lab.benchmark_result
    assert b.config.spin_duration_us == TIMED_SPIN_US and b.config.allow_spinning is None
    assert f"spinning at most {TIMED_SPIN_US} µs (time-bounded)" in b.to_text()
    assert f"spin ≤{TIMED_SPIN_US} µs" in lab.history.to_pandas()["label"].tolist()[-1]


def test_history_picks_two_runs_and_snippets_one(lab) -> None:
    lab.spinning.value = "off"
    assert lab.history.to_pandas()["label"].tolist()[-1] == "cpu · all · no-spin · dims batch=1"
    assert (lab.run_a.value, lab.run_b.value) == (1, 2)
    lab.compare_button.click()
    from ortlab.views.lab.history import Warnings

    shown = [x for x in lab.shown["History comparison"] if not isinstance(x, Warnings)]
    table, per_node, _, graph = shown
    assert list(table.columns) == ["metric", "run 1", "run 2", "delta", "ratio"]
    warned = any(isinstance(x, Warnings) for x in lab.shown["History comparison"])
    assert warned == bool(lab.history.disagreements(1, 2))
    assert isinstance(per_node, ortlab.DiffResult) and lab.run_diff is per_node
    assert per_node.label_a == "run 1" and graph.color_by == "diff"
    assert set(per_node.nodes["node"]) == set(lab.history.run(1).placement.nodes["node"])
    lab.run_snippet_button.click()
    assert "(run 1)" in lab.notice.value and "ort.InferenceSession" in lab.notice.value
    assert "overhead_s" in lab.history.to_pandas().columns


@pytest.mark.slow
def test_the_quantization_tab_says_where_the_numbers_change(lab) -> None:
    """The accuracy view (issue 49): the Lab's model at its config against the chosen other
    side — its per-tensor errors are ortlab.diverge's on the same model, config and inputs,
    shown with its plot and the graph coloured by the error; the variants' comparison, once
    run, is shown beside it."""
    lab.diverge_against.value = "fp16"
    lab.diverge_button.click()
    dv = lab.divergence
    assert lab.error.value == "" and isinstance(dv, ortlab.DivergenceResult)
    shown = lab.shown["Quantization"]
    assert shown[1] is dv and isinstance(shown[3], ortlab.GraphView)
    assert shown[3].color_by == "quant_error"
    assert dv.reference.endswith("cpu · all") and "fp16" in dv.other
    alone = ortlab.diverge(lab.model, ortlab.to_fp16(lab.model), lab.config, progress=False)
    assert [t.tensor for t in alone.tensors] == [t.tensor for t in dv.tensors]
    for a, b in zip(alone.tensors, dv.tensors, strict=True):
        assert a.cosine == pytest.approx(b.cosine, abs=1e-9), a.tensor
    lab.diverge_against.value = "level=disabled"
    lab.quant_button.click()
    assert lab.comparison is not None and lab.divergence is dv  # kept, shown beside
    assert any(x is dv for x in lab.shown["Quantization"])


@pytest.mark.slow
def test_doctor_tab_and_apply_best(lab) -> None:
    lab.level.value = "disabled"
    lab.budget.value = 10
    lab.doctor_button.click()
    d = lab.doctor_result
    assert isinstance(d, ortlab.DoctorResult) and lab.shown["Doctor"][1] is d
    assert any(f.rule == "optimization_level" for f in d.findings)
    runs = len(lab.history)
    lab.apply_button.click()
    assert lab.error.value == ""
    assert len(lab.history) == runs + 1  # one run for the whole change, not one per control
    assert lab.config == d.best.config.with_(fallback="allow")  # the Lab shows fallbacks
    assert lab.model_path == Path(d.best.model_path)
    assert lab.history.records[-1].model_path == d.best.model_path


@pytest.mark.slow
def test_apply_best_applies_exactly_the_model_and_settings_the_doctor_verified(lab) -> None:
    """A per-channel static QDQ file with provider options, threads, spinning, IO binding and
    a setting no control shows: Apply best runs that very file with those very settings."""
    import dataclasses

    from ortlab.core.stats import Paired
    from ortlab.diagnosis.doctor import Best

    lab.budget.value = 10
    lab.doctor_button.click()
    d = lab.doctor_result
    q = ortlab.quantize(lab.model, mode="static", per_channel=True, calibration_size=4)
    providers = ["cpu"]
    options: dict[str, dict[str, str]] = {}
    if "CUDAExecutionProvider" in lab.provider_boxes:  # in the build; it falls back here
        providers, options = ["cuda", "cpu"], {"cuda": {"device_id": "0"}}
    cfg = ortlab.SessionConfig(
        providers,
        provider_options=options,
        level="extended",
        intra_op_threads=1,
        allow_spinning=False,
        io_binding=True,
        enable_mem_pattern=False,
    )
    best = Best(
        cfg,
        q.name,
        str(q.path),
        list(q.variant.steps),
        Paired(0.5, 0.4, 0.6, "faster"),
        0.9999,
    )
    lab.state = lab.state.keep(doctor=dataclasses.replace(d, best=best))
    lab.apply_button.click()
    assert lab.error.value == ""
    assert lab.config == cfg.with_(fallback="allow")
    assert lab.model_path == q.path
    run = lab.history.records[-1]
    assert run.model_path == str(q.path) and run.config == lab.config
    assert "per-channel" in run.label and lab.shown["Benchmark"][0].model == q.name


def test_export_report_of_the_lab_state(lab, tmp_path) -> None:
    out = lab.export_report(tmp_path / "lab.html")
    text = out.read_text()
    assert "Placement: where each node runs" in text and "History" in text
    assert "Benchmark" in text and str(out) in lab.notice.value


def test_held_controls_are_not_a_run_and_come_back_after_an_error(lab) -> None:
    """``with lab.held():`` a control set by the Lab is not a request to re-run, and the hold
    ends on the way out even when the block fails (it was reset without ``finally``)."""
    runs = len(lab.history)
    with lab.held():
        lab.runs.value = lab.runs.value + 1
    assert len(lab.history) == runs and not lab.hold_runs
    with pytest.raises(ZeroDivisionError), lab.held():
        _ = 1 / 0
    assert not lab.hold_runs
    lab.runs.value = lab.runs.value + 1  # not held: a change is a run
    assert len(lab.history) == runs + 1


def test_the_labs_results_live_in_one_state(lab) -> None:
    """Every result is a field of one typed record the Lab swaps whole; its public names
    read it, and a job's result is kept only through it (a failed job keeps the old)."""
    from ortlab.views.lab.state import LabState

    st = lab.state
    assert isinstance(st, LabState)
    assert lab.placement is st.placement and lab.benchmark_result is st.benchmark
    assert lab.profile_result is st.profile is st.placement.profile
    with pytest.raises(dataclasses.FrozenInstanceError):
        st.placement = None  # type: ignore[misc]
    with pytest.raises(AttributeError):
        lab.placement = None  # read-only: the state is the one place it is written
    lab.limits_buttons["cost"].click()
    assert lab.state is not st and lab.cost is lab.state.cost is not None
    assert lab.state.placement is st.placement  # the rest of the state carried over


@pytest.mark.slow
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


@pytest.mark.slow
def test_outputs_bypass_ipython_history_and_old_results_are_dropped(lab) -> None:
    """IPython's display formatter appends every output to the running cell's history; the Lab
    builds its bundles itself, and keeps full results only for the most recent runs."""
    import gc

    def bundles() -> list[dict]:
        return [
            o
            for o in gc.get_objects()
            if isinstance(o, dict) and "application/vnd.plotly.v1+json" in o
        ]

    lab.tabs.selected_index = list(lab.panes).index("Profile")  # its figures drawn every run
    gc.collect()
    before = {id(b) for b in bundles()}  # other Labs' (earlier tests') figures
    for level in ("disabled", "basic", "extended", "all") * 3:
        lab.level.value = level
    gc.collect()
    new = [b for b in bundles() if id(b) not in before]
    assert 4 <= len(new) <= 5  # the figures on screen now (op types, EPs, timeline, memory)
    kept = [r for r in lab.history.records if r.placement is not None]
    assert len(kept) == lab.history.keep_results and kept[-1] is lab.history.records[-1]


# ---------------------------------------------------------------------- issue 13


def test_dims_box_shows_the_dims_used_and_enter_reruns(lab) -> None:
    assert lab.dims.value == "batch=1" and not lab.dims.continuous_update  # synthesizer's 1
    lab.dims.value = "batch=4"  # what Enter (or leaving the box) sends
    assert len(lab.history) == 2 and lab.error.value == ""
    assert "input: float32[4, 256]" in lab.shown["Benchmark"][0].feeds
    assert lab.history.records[-1].shapes == "dims batch=4"


def test_history_labels_tell_the_runs_apart(lab) -> None:
    lab.variant.value = "dynamic int8"
    lab.per_channel.value = True
    lab.transformers.value = True
    lab.dims.value = "batch=2"
    labels = lab.history.to_pandas()["label"].tolist()
    assert labels == [
        "cpu · all · dims batch=1",
        "cpu · all · dynamic int8 · dims batch=1",
        "cpu · all · dynamic int8 per-channel · dims batch=1",
        "cpu · all · dynamic int8 per-channel · transformers optimizer · dims batch=1",
        "cpu · all · dynamic int8 per-channel · transformers optimizer · dims batch=2",
    ]
    assert len(set(labels)) == len(labels)
    assert [label for label, _ in lab.run_a.options] == [
        f"run {i}: {label}" for i, label in enumerate(labels, 1)
    ]


def test_history_snippet_names_the_model_each_run_used(lab) -> None:
    lab.variant.value = "dynamic int8"
    int8 = lab.history.records[-1].model_path
    assert int8 != str(lab.model.path)
    assert "DynamicQuantizeLinear" in ortlab.load(int8).summary.op_types
    lab.run_a.value = 2
    lab.run_snippet_button.click()
    assert f"InferenceSession({int8!r}" in lab.notice.value.replace("&#x27;", "'")
    lab.run_a.value = 1
    lab.run_snippet_button.click()
    assert f"InferenceSession({str(lab.model.path)!r}" in lab.notice.value.replace("&#x27;", "'")


def test_profile_top_nodes_use_medians_throughout() -> None:
    """Five runs; node b takes 2 µs except one stalled 1000 µs call. Totals would give b 94 %
    of node time; medians give 2 / 12."""
    from ortlab.analysis.profiling import ProfileData, ProfileResult
    from ortlab.views.lab.pickers import median_shares

    runs = 5
    ev_node = [0, 1] * runs
    ev_run = [r for r in range(runs) for _ in (0, 1)]
    durs = [10.0, 2.0] * runs
    durs[1] = 1000.0  # b's call in run 0 stalled
    data = ProfileData(
        node=["a", "b"],
        op_type=["Conv", "ReorderInput"],
        provider=["CPU", "CPU"],
        input_types=[[], []],
        output_types=[[], []],
        ev_node=ev_node,
        ev_run=ev_run,
        ev_start_us=[0.0, 10.0] * runs,
        ev_dur_us=durs,
        run_us=[12.0] * runs,
    )
    t = median_shares(ProfileResult(model="m", config=SessionConfig(), data=data))
    assert t["node"].tolist() == ["a", "b"]
    assert t["median_us"].tolist() == [10.0, 2.0]
    assert t["share"].tolist() == pytest.approx([10 / 12, 2 / 12])


def test_profile_tab_rows_and_caption_say_the_same_statistic(lab) -> None:
    from ortlab.views.lab.pickers import median_shares

    t = median_shares(lab.profile_result)
    first = t.iloc[0]
    label, node = lab.top_nodes.options[0]
    assert node == first["node"]
    assert label.endswith(f"{first['median_us']:.0f} µs · {first['share']:.1%}")
    caption = lab.shown["Profile"][0].value  # the text above the top-nodes list
    assert "median µs per run" in caption and "median run's node time" in caption


def test_cancel_between_two_steps_stops_the_refresh(lab, monkeypatch) -> None:
    """Cancel pressed after placement's worker call returned and before the benchmark's began
    (the next call used to clear the worker's flag): the benchmark must not run."""
    from ortlab.analysis.placement.measure import placement_run

    benchmarks: list[object] = []

    def placement_then_cancel(*args, **kwargs):
        out = placement_run(*args, **kwargs)
        lab.cancel_button.click()
        return out

    monkeypatch.setattr("ortlab.analysis.labrun.placement_run", placement_then_cancel)
    monkeypatch.setattr(
        "ortlab.analysis.labrun.benchmark_run", lambda *a, **_k: benchmarks.append(a)
    )
    lab.level.value = "basic"
    assert benchmarks == [] and len(lab.history) == 1
    assert lab.error.value == "<i>cancelled: previous results kept</i>"


def test_cancel_stops_the_worker_call_that_starts_after_the_click(lab) -> None:
    """A click that lands just before a worker call starts: that call does not run, and a
    call already in flight stops (the job's cancel token, not the per-call flag a new call
    clears)."""
    from ortlab.engine.worker import Worker, get_worker

    worker = get_worker()
    if not isinstance(worker, Worker):
        pytest.skip("the in-process worker has nothing to cancel")
    pid = worker.pid
    lab.jobs.cancelled.set()
    with (
        worker.cancel_on(lab.jobs.cancelled),
        pytest.raises(ortlab.WorkerCancelledError, match="before"),
    ):
        worker.call("ping", {})
    assert worker.pid == pid, "a call that never started must not cost the worker"
    lab.jobs.cancelled.clear()
    assert worker.call("ping", {}) == pid


def _vad(tmp_path: Path) -> ortlab.Model:
    from tests.test_cli import vad_like

    return ortlab.load(vad_like(tmp_path))


def test_lab_with_feeds_runs_a_state_model_in_every_tab(tmp_path: Path) -> None:
    from tests.test_cli import vad_feeds

    lab = ortlab.Lab(_vad(tmp_path), feeds=vad_feeds(), synchronous=True, runs=5)
    assert lab.error.value == "" and len(lab.history) == 1
    assert "input: float32[1, 512]" in lab.shown["Benchmark"][0].feeds
    assert lab.dims.disabled and "state: float32[2, 1, 128]" in lab.dims.value
    assert "feeds" in lab.dims.tooltip
    assert lab.history.records[-1].shapes.startswith("feeds input: float32[1, 512]")
    lab.variant.value = "static QDQ"  # calibrated on the feeds' shapes
    assert lab.error.value == "" and len(lab.history) == 2
    lab.opt_button.click()
    assert lab.error.value == "" and lab.optimization is not None
    lab.quant_button.click()
    assert lab.error.value == "" and lab.comparison is not None


@pytest.mark.slow
def test_lab_doctor_uses_the_feeds(tmp_path: Path) -> None:
    from tests.test_cli import vad_feeds

    lab = ortlab.Lab(_vad(tmp_path), feeds=vad_feeds(), synchronous=True, runs=5)
    lab.budget.value = 10
    lab.doctor_button.click()
    d = lab.doctor_result
    assert lab.error.value == "" and d is not None
    # the doctor timed the Lab's own feeds: it records them as the Lab's benchmark does
    assert d.synthetic is False and d.feeds == lab.shown["Benchmark"][0].feeds
    assert "state: float32[2, 1, 128]" in d.feeds and d.measured[0].key == "baseline"


def test_lab_says_previous_results_are_kept_only_when_there_are_some(tmp_path: Path) -> None:
    from tests.test_cli import vad_feeds

    model = _vad(tmp_path)
    lab = ortlab.Lab(model, synchronous=True, runs=5)  # synthesized 1s: the model cannot run
    assert "Error" in lab.error.value and len(lab.history) == 0
    assert "kept" not in lab.error.value
    assert "unnamed dims" in lab.dims.tooltip and "feeds" in lab.dims.tooltip
    feeds = vad_feeds()
    feeds["audio"] = feeds.pop("input")
    with pytest.raises(ortlab.FeedError, match=r"(?s)missing \['input'\].*The model takes: input"):
        ortlab.Lab(model, feeds=feeds, synchronous=True)


def test_what_if_target_shows_the_predicted_placement(lab) -> None:
    """The target selector beside the EP boxes: QNN's compiler (or the NNAPI rules) predict
    the partition at the Lab's shapes; the Placement tab shows it, with reasons and a graph."""
    import pytest

    from ortlab.views.lab.tabjobs import run_whatif

    pytest.importorskip("onnxruntime_qnn")
    lab.target.value = "nnapi"
    returned = run_whatif(lab)  # the job returns its result; the Lab's button keeps it
    assert lab.whatif_result is None
    lab.whatif_button.click()  # the synchronous Lab: the job, then its result kept
    w = lab.whatif_result
    assert isinstance(w, ortlab.WhatIfResult) and w.targets[0].target == "nnapi"
    assert isinstance(returned, ortlab.WhatIfResult) and returned.targets[0].target == "nnapi"
    shown = lab.shown["Placement"]
    assert shown[0] is lab.tab_controls.whatif_bar and isinstance(shown[1], ortlab.PlacementResult)
    assert w in shown and isinstance(shown[-1], ortlab.GraphView)
    lab.run()  # a refresh keeps the prediction under the new measured placement
    assert w in lab.shown["Placement"]


def test_int4_variant_and_memory_in_the_lab(lab) -> None:
    lab.variant.value = "int4 weight-only"
    assert lab.error.value == ""
    used = ortlab.load(lab.history.records[-1].model_path)
    assert "com.microsoft.MatMulNBits" in used.summary.op_types  # the run used the int4 model
    memory = lab.shown["Profile"][5]
    assert "memory over one run" in memory.layout.title.text


def test_switching_one_optimizer_off_in_the_lab() -> None:
    """The transformers the session ran are offered, those that changed the graph first; one
    switched off reaches the session (it no longer fires, its fused op is gone from the graph
    ORT ran) and stays offered as '(off)'."""
    lab = ortlab.Lab(ortlab.examples.load("bert_tiny"), synchronous=True, runs=5)
    offered = [name for _, name in lab.optimizers.options]
    fired = lab.placement.report.fired
    assert "SkipLayerNormFusion" in fired
    assert set(offered[: len(fired)]) == set(fired), "those that fired come first"
    assert set(lab.placement.report.transformers) <= set(offered)
    before = {r.op_type for r in lab.placement.optimized_rows}
    assert "SkipLayerNormalization" in before
    lab.optimizers.value = ("SkipLayerNormFusion",)
    assert lab.error.value == "" and len(lab.history) == 2
    assert lab.config.disabled_optimizers == ("SkipLayerNormFusion",)
    assert "SkipLayerNormFusion" not in lab.placement.report.fired
    assert "SkipLayerNormalization" not in {r.op_type for r in lab.placement.optimized_rows}
    assert ("SkipLayerNormFusion (off)", "SkipLayerNormFusion") in lab.optimizers.options
    assert lab.optimizers.value == ("SkipLayerNormFusion",)
    assert "disable_specified_optimizers" in lab.history.records[-1].config.snippet()


# ---------------------------------------------------------------------- issue 16: the refresh


def test_a_run_draws_the_tab_on_screen_and_the_others_when_opened(mlp: ortlab.Model) -> None:
    from ortlab.views.lab.outputs import WAITING as _WAITING

    lab = ortlab.Lab(mlp, synchronous=True, runs=10, tab="Graph")
    waiting = [p for p, out in lab.panes.items() if out.outputs == (_WAITING,)]
    assert waiting == ["Overview", "Placement", "Profile", "Benchmark", "History"]
    assert lab.panes["Graph"].outputs[0]["data"]  # drawn with the run
    lab.level.value = "disabled"  # a second run: the Profile tab never showed the first
    lab.tabs.selected_index = list(lab.panes).index("Profile")  # opened: drawn now
    figures = lab.shown["Profile"][2:]
    assert lab.panes["Profile"].outputs != (_WAITING,) and len(figures) == 4
    assert "disabled" in lab.shown["Benchmark"][0].config.label()  # the latest run
    assert lab.panes["Benchmark"].outputs != (_WAITING,), "looking a tab up draws it"
    # the Graph tab, left behind by the second run, draws that run's placement when opened
    statuses = {r.node: r.status for r in lab.placement.node_rows}
    drawn = {n.name: n.status for n in lab.graph.graph_data.nodes}
    assert drawn == {k: v for k, v in statuses.items() if k in drawn}
    lab.level.value = "all"  # on the Profile tab: it is redrawn by the run itself
    assert lab.panes["Profile"].outputs != (_WAITING,)
    assert lab.panes["Graph"].outputs == (_WAITING,)
    with pytest.raises(ValueError, match="choose one of Overview"):
        ortlab.Lab(mlp, synchronous=True, run_on_start=False, tab="Graphs")


def test_a_live_lab_keeps_one_worker_across_runs(mlp: ortlab.Model) -> None:
    """Each run of a live Lab is a thread that ends; the worker must outlive it (it used to
    be killed with the thread that started it, and restarted by every run)."""
    from ortlab.engine.worker import get_worker

    lab = ortlab.Lab(mlp, synchronous=False, runs=5)
    pids = []
    for level in ("disabled", "all"):
        assert lab.jobs.thread is not None and lab.wait(120)
        time.sleep(0.5)  # a worker killed with the job's thread would be gone by now
        pids.append(get_worker().pid)
        lab.level.value = level
    assert lab.wait(120)
    assert len(lab.history) == 3 and lab.error.value == ""
    assert pids[0] is not None and pids == [pids[0]] * 2 == [get_worker().pid] * 2


def test_ort_time_is_measured_inside_the_call_and_covers_what_ort_timed(mlp: ortlab.Model) -> None:
    """``ort_ms``, what the Lab subtracts from a refresh, lies between ORT's own records of the
    same work (the profiler's run durations, the timed runs, the session build) and the wall
    time of the whole call."""
    t0 = time.perf_counter()
    pl = ortlab.placement(mlp, runs=5, progress=False)
    wall_pl = (time.perf_counter() - t0) * 1e3
    assert pl.profile is not None and pl.ort_ms is not None
    profiled_ms = sum(pl.profile.data.run_us) / 1e3  # the measured runs, in ORT's own clock
    assert pl.report.create_ms + profiled_ms <= pl.ort_ms <= wall_pl
    t0 = time.perf_counter()
    b = ortlab.benchmark(mlp, runs=20, warmup=3, progress=False)
    wall_b = (time.perf_counter() - t0) * 1e3
    assert b.ort_ms is not None
    assert sum(b.latencies_ns) / 1e6 <= b.ort_ms <= wall_b


def test_nothing_of_the_lab_runs_beside_ort_while_it_is_timed(
    mlp: ortlab.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Lab's warm-up (plotly's lazy imports, tensor types, the graph scripts) once ran on
    a thread during the first run, taking a core from ORT's timed runs on a 2-core machine.
    At every worker call of a Lab's construction and refresh, no other thread of this process
    may be running the Lab's, ortlab's views' or plotly's code."""
    import sys
    import threading

    from ortlab.engine.worker import Worker

    seen: list[str] = []
    call = Worker.call

    def watched(self: Worker, task: str, kwargs: dict, **kw: object) -> object:
        me = threading.get_ident()
        for ident, frame in sys._current_frames().items():
            stack = frame
            while ident != me and stack is not None:
                name = stack.f_code.co_filename
                if "plotly" in name or f"ortlab{os.sep}views" in name:
                    seen.append(f"{task}: {name}:{stack.f_code.co_name}")
                stack = stack.f_back
        return call(self, task, kwargs, **kw)

    monkeypatch.setattr(Worker, "call", watched)
    lab = ortlab.Lab(mlp, runs=3, synchronous=True, tab="Profile")
    lab.level.value = "basic"
    lab.close()
    assert len(lab.history) == 2 and not seen


def test_lab_takes_dims_and_runs_at_them(bert_tiny: ortlab.Model) -> None:
    """``Lab(model, dims=…)`` was a bare TypeError: now the dims box starts with them and the
    first run uses them; a name the model lacks is a warning naming its dims. Only what the
    user gave reads "(given)": the batch ortlab chose stays a default in every result, as the
    resolver itself says it (an independent call), also after a re-run from the box."""
    from ortlab.core.inputs import resolve_dims

    lab = ortlab.Lab(bert_tiny, dims={"sequence": 16}, synchronous=True, runs=3)
    assert "sequence=16" in lab.dims.value
    why = {c.name: c.why for c in resolve_dims(bert_tiny.signature, {"sequence": 16}).values()}
    assert why["sequence"] == "given" and why["batch"] != "given"
    for _ in range(2):
        for result in (lab.benchmark_result, lab.placement):
            assert "sequence=16 (given)" in result.feeds
            assert f"batch=1 ({why['batch']})" in result.feeds, result.feeds
        lab.dims.value = lab.dims.value + " "  # Enter again: the box shows both dims now
    assert lab.history.records[-1].shapes.startswith("dims ") and "sequence=16" in (
        lab.history.records[-1].shapes
    )
    lab.close()
    with pytest.warns(ortlab.OrtlabWarning, match="does not have"):
        other = ortlab.Lab(bert_tiny, dims={"width": 3}, synchronous=True, run_on_start=False)
    other.close()
    with pytest.raises(ortlab.OrtlabError, match="pass one of them"):
        ortlab.Lab(
            bert_tiny,
            dims={"sequence": 8},
            feeds=bert_tiny.example_inputs(),
            synchronous=True,
            run_on_start=False,
        )


def test_history_shows_each_runs_interval_and_load_and_warns_when_the_machine_moved(lab) -> None:
    """Each History row carries its median run's interval and the machine's load (as its
    Benchmark tab says them); two runs of the same settings whose intervals do not meet are
    named: the machine changed, not the model (the History once swung 1 → 6 ms silently)."""
    from ortlab.views.lab.history import History, RunRecord

    t = lab.history.to_pandas()
    b = lab.shown["Benchmark"][0]
    low, high, _ = b.p50_interval
    assert (t.loc[0, "p50_low_ms"], t.loc[0, "p50_high_ms"]) == (low, high)
    assert t.loc[0, "p50_low_ms"] <= t.loc[0, "p50_ms"] <= t.loc[0, "p50_high_ms"]
    assert t.loc[0, "other_cores"] == b.other_cores is not None
    (fig,) = [x for x in lab.shown["History"] if hasattr(x, "data")]
    assert list(fig.data[0].error_y.array) == [high - t.loc[0, "p50_ms"]]

    cfg = ortlab.SessionConfig()
    h = History()
    for run, (p50, lo, hi, load) in enumerate(
        [(1.0, 0.9, 1.1, 0.0), (1.05, 0.95, 1.2, 0.1), (6.0, 5.0, 7.0, 1.8)], start=1
    ):
        h.add(
            RunRecord(
                run=run,
                config=cfg,
                variant="none",
                p50_ms=p50,
                p90_ms=p50,
                mean_ms=p50,
                providers="cpu",
                fallback="",
                seconds=1.0,
                p50_low_ms=lo,
                p50_high_ms=hi,
                other_cores=load,
            )
        )
    [swing] = h.swings()
    assert "runs 1 and 3" in swing and "0.00 and 1.80 cores" in swing
    h.records.pop()
    assert h.swings() == []  # overlapping intervals: no claim


def test_a_failed_run_at_guessed_dims_says_which_in_any_tab(lab) -> None:
    """The Optimization tab's RunError at a guessed OCR width said nothing about the guess; the
    Lab adds which dims it guessed and where to set them, whatever verb failed."""

    def fail() -> None:
        raise ortlab.RunError("Non-zero status code returned while running Reshape node")

    lab.jobs.guarded(fail)
    assert "These dims were chosen by ortlab (batch=1)" in lab.error.value
    assert "dims box" in lab.error.value
    lab.dims.value = "batch=2"  # typed: given, no longer a guess
    lab.jobs.guarded(fail)
    assert "chosen by ortlab" not in lab.error.value


def test_limits_tab_measures_the_roofline_of_the_current_settings(
    lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Limits tab runs ortlab.roofline under the controls' settings and shows the result
    itself (the same table every view shows) with its figure; cost and a shape sweep too, and
    a sweep box that does not parse says so."""
    lab.level.value = "basic"
    lab.limits_buttons["roofline"].click()
    roof = lab.roofline
    assert lab.error.value == "" and isinstance(roof, ortlab.RooflineResult)
    assert roof.config.level == "basic" and lab.shown["Limits"][-1] is roof
    assert {r.node for r in roof.rows} == set(roof.profile.by_node()["node"])
    lab.limits_buttons["cost"].click()
    assert isinstance(lab.cost, ortlab.CostResult) and lab.shown["Limits"][-1] is lab.cost
    # the cost counts the graph the roofline beside it timed: the Lab's settings, its model
    assert lab.cost.total_flops > 0 and lab.cost.config.level == "basic"
    assert lab.cost.model == roof.model == lab.model.name
    lab.sweep_dims.value = "batch=1,2"
    lab.limits_buttons["sweep"].click()
    assert [r.dims for r in lab.sweep.rows] == [{"batch": 1}, {"batch": 2}]
    assert lab.sweep.config.level == "basic"
    lab.sweep_dims.value = "batch=one"
    lab.limits_buttons["sweep"].click()
    status = lab.tab_controls.status["Limits"]  # the error where the button is
    assert "is not name=int" in status.error.value
    assert "Previous results are kept" in status.error.value
    assert "Limits tab" in lab.error.value and lab.shown["Limits"][0] is lab.tab_controls.limits_bar
    # the last run as a Perfetto trace, in the working directory like the HTML report
    monkeypatch.chdir(tmp_path)
    lab.limits_buttons["perfetto"].click()
    assert lab.error.value == "" and lab.perfetto == tmp_path / lab.perfetto.name
    trace = json.loads(lab.perfetto.read_text(encoding="utf-8"))
    events = [e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "node"]
    assert len(events) == len(lab.placement.profile.data.ev_node)
    # and the report carries what the tab measured, each as a section of its own
    html = lab.export_report(tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Roofline: is each node near this machine" in html and "Cost: the work" in html


@pytest.mark.slow
def test_limits_tab_throughput(lab) -> None:
    lab.limits_buttons["throughput"].click()
    t = lab.throughput
    assert lab.error.value == "" and isinstance(t, ortlab.ThroughputResult)
    assert sorted({r.concurrency for r in t.rows}) == [1, 2, 4]


# ---------------------------------------------------------------------- issue 37: one story


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)]


def test_overview_leads_with_the_runs_own_numbers(lab) -> None:
    """The Overview's first lines are the last run's latency with its interval (the
    benchmark's p50 and ``p50_interval``), its three slowest nodes with their shares
    (``ProfileResult.top_nodes``) and the EP split (``PlacementResult.summary``), each number
    as its result holds it; the model card follows. A run refreshes it."""
    head, card = lab.shown["Overview"][:2]
    b, prof, pl = lab.benchmark_result, lab.profile_result, lab.placement
    assert card is lab.model.summary
    html = head._repr_html_()
    low, high, _ = b.p50_interval
    assert f"p50 {fmt_interval(b.stats.p50_ms, low, high)} (" in html, html  # THE format
    assert f"median of {b.stats.count} runs" in html and "profiling off" in html
    items = re.findall(r"<li>(.*?)</li>", html)
    top = prof.top_nodes(3)
    assert len(items) == len(top) == 3
    for item, row in zip(items, top.itertuples(), strict=True):
        us, share = _numbers(item.split(" · ")[-2])[0], _numbers(item.split(" · ")[-1])[0]
        assert us == pytest.approx(row.us_per_run, abs=0.05)
        assert share == pytest.approx(100 * row.share, abs=0.05)
    split = re.search(r"Where it ran</b>: (.*?) <small>", html).group(1)
    for part, row in zip(split.split("; "), pl.summary().itertuples(), strict=True):
        nodes, share = _numbers(part)[-2:]
        assert nodes == row.nodes and share == pytest.approx(100 * row.time_share, abs=0.05)
    assert "Doctor tab" in html  # no doctor yet: where to find what to try
    lab.level.value = "basic"
    assert lab.shown["Overview"][0].benchmark is lab.benchmark_result is not b


def test_overview_names_the_doctors_verified_best(lab) -> None:
    import html as html_lib
    from types import SimpleNamespace

    from ortlab.core.stats import Paired, paired_ratio
    from ortlab.diagnosis.best import Best
    from ortlab.views.lab.overview import Headline

    cfg = ortlab.SessionConfig(intra_op_threads=1)
    v = paired_ratio(np.ones(8), np.full(8, 0.81) + np.linspace(-0.04, 0.05, 8))
    verdict = v.text("baseline", cfg.label())
    best = Best(cfg, "original", str(lab.model.path), [], Paired.of(v, verdict), 1.0)
    d = SimpleNamespace(best=best, findings=[])
    html = Headline(lab.benchmark_result, lab.profile_result, lab.placement, d)._repr_html_()
    said = re.search(r"verified best</b>: (.*?)<small>", html).group(1)
    assert cfg.label() in said and html_lib.escape(verdict) in said  # the verdict, once, whole
    assert said.count("time ratio") == 1


def test_a_failing_tab_job_shows_its_error_in_its_tab(lab, monkeypatch, tmp_path: Path) -> None:
    """The Doctor's and a Limits job's error lands in that tab (its status line says failed,
    its error box holds the error, both inside what the tab's output shows); above the tabs
    only a line pointing there; ``lab.last_error`` keeps it."""

    def boom(*_a, **_k):
        raise ortlab.RunError("the doctor's worker call failed")

    monkeypatch.setattr("ortlab.views.lab.tabjobs.doctor", boom)
    lab.doctor_button.click()
    status = lab.tab_controls.status["Doctor"]
    assert status.state == "failed" and "failed after" in status.line.value
    assert "the doctor&#x27;s worker call failed" in status.error.value
    bar = lab.tab_controls.doctor_bar
    assert status.box in bar.children and lab.shown["Doctor"][0] is bar
    view = lab.panes["Doctor"].outputs[0]["data"]["application/vnd.jupyter.widget-view+json"]
    assert view["model_id"] == bar.model_id  # the tab's output is the bar with the error box
    assert isinstance(lab.last_error, ortlab.RunError)
    assert "Doctor tab" in lab.error.value and "Traceback" not in lab.error.value

    monkeypatch.setattr("ortlab.views.lab.limits.cost", boom)
    lab.limits_buttons["cost"].click()
    limits = lab.tab_controls.status["Limits"]
    assert limits.state == "failed" and "worker call failed" in limits.error.value
    assert limits.box in lab.tab_controls.limits_bar.children
    assert status.state == "failed", "each tab keeps its own story"
    monkeypatch.chdir(tmp_path)  # the trace is written to the working directory
    lab.limits_buttons["perfetto"].click()  # a job that succeeds clears its tab's error
    assert limits.state == "done" and limits.error.value == "" and lab.last_error is None

    lab.level.value = "basic"  # two runs to compare
    monkeypatch.setattr("ortlab.views.lab.tabjobs.diff", boom)
    lab.compare_button.click()
    history = lab.tab_controls.status["History"]
    assert history.state == "failed" and "worker call failed" in history.error.value
    assert history.box in lab.tab_controls.history_bar.children


def test_a_tab_says_its_job_runs_with_progress_and_seconds_then_how_it_ended(
    mlp: ortlab.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live Lab: the Optimization tab's status line says "running" the moment its button
    is pressed, then the job's progress and its seconds (the timer counts while the job is
    silent), then "done in N s". Quantization names the variant it builds (never "idle")."""
    from types import SimpleNamespace

    lab = ortlab.Lab(mlp, sync=False, run_on_start=False, runs=5)
    gate, entered = threading.Event(), threading.Event()
    result = SimpleNamespace(plot=lambda: "figure", counts=SimpleNamespace(T="counts"))

    def slow(*_a, progress, **_k):
        progress(1, 3)
        entered.set()
        gate.wait(60)
        return result

    monkeypatch.setattr("ortlab.views.lab.tabjobs.optimization_diff", slow)
    lab.opt_button.click()
    status = lab.tab_controls.status["Optimization"]
    assert status.state == "running" and status.text.startswith("running the optimization diff")
    assert entered.wait(60)
    assert "levels 1/3" in status.text and status.cancel_button.layout.display == ""
    assert not lab.wait(0.2)  # still running
    time.sleep(1.3)  # silent for over a second: the timer re-draws the line
    seconds = re.search(r"diff… (\d+) s", status.line.value)
    assert seconds and int(seconds.group(1)) >= 1, status.line.value
    gate.set()
    assert lab.wait(60)
    assert status.state == "done" and "done in" in status.line.value
    assert status.error.value == "" and lab.optimization is result
    assert status.cancel_button.layout.display == "none"

    gate.clear()
    entered.clear()

    def building(*_a, **_k):
        entered.set()
        gate.wait(60)
        raise ortlab.OrtlabError("no fp16 today")

    monkeypatch.setattr("ortlab.views.lab.tabjobs.to_fp16", building)
    lab.quant_button.click()
    quant = lab.tab_controls.status["Quantization"]
    assert entered.wait(60)
    assert "building fp16" in quant.text and lab.progress.description == "building fp16"
    gate.set()
    assert lab.wait(60)
    assert quant.state == "failed" and "no fp16 today" in quant.error.value
    assert lab.progress.description == "idle"


def test_wait_and_sync(mlp: ortlab.Model, tmp_path: Path, monkeypatch) -> None:
    """``lab.wait()`` returns once the first run of a live Lab is done (its History row is
    there, and an exported report has its benchmark); ``sync=`` is the documented name,
    ``synchronous=`` still works; a script (no kernel) runs synchronously by default."""
    from ortlab.views.lab.jobs import choose_sync

    lab = ortlab.Lab(mlp, sync=False, runs=5)
    assert lab.wait(120) and len(lab.history) == 1 and lab.last_error is None
    assert lab.shown["Overview"][0].benchmark is lab.benchmark_result
    lab.level.value = "basic"  # a live run, then the report: written after it
    html = lab.export_report(tmp_path / "r.html").read_text(encoding="utf-8")
    assert len(lab.history) == 2 and "Benchmark" in html
    assert ortlab.Lab(mlp, synchronous=True, run_on_start=False).jobs.sync
    with pytest.raises(ortlab.OrtlabError, match="former name"):
        ortlab.Lab(mlp, sync=True, synchronous=False, run_on_start=False)
    monkeypatch.delenv("ORTLAB_LAB_SYNC", raising=False)
    assert choose_sync(None) is True  # pytest runs without a Jupyter kernel
    monkeypatch.setenv("ORTLAB_LAB_SYNC", "0")
    assert choose_sync(None) is False and choose_sync(True) is True


def test_top_node_pick_selects_the_node_that_carries_the_time() -> None:
    """A Conv+Relu kernel: its originals are listed Relu first; picking it selects the Conv
    (the node the placement join credits with the kernel's time), not the Relu "fused into"
    it with no time of its own, and the list names the Conv."""
    lab = ortlab.Lab(ortlab.examples.load("residual_cnn"), sync=True, runs=5, tab="Profile")
    rows = {r.node: r for r in lab.placement.node_rows}
    fused = {r.node: r.fused_from for r in lab.placement.optimized_rows}
    label, kernel = next(
        (label, k)
        for label, k in lab.top_nodes.options
        if {rows[n].op_type for n in fused.get(k, ())} == {"Conv", "Relu"}
    )
    assert rows[fused[kernel][0]].op_type == "Relu", "ORT lists the Relu first"
    lab.top_nodes.value = kernel
    picked = rows[lab.graph.selected["name"]]
    assert picked.op_type == "Conv" and picked.us_per_run > 0
    assert picked.us_per_run == max(rows[n].us_per_run for n in fused[kernel])
    assert set(lab.graph.highlighted) == set(fused[kernel])
    assert label.startswith(picked.node)
    lab.close()


def test_history_says_where_two_runs_disagree() -> None:
    """Two runs whose benchmark says B is faster while their profiled runs say B is slower
    (one met a busier machine): the History names the disagreement and the load that changed,
    and says nothing for two runs that agree."""
    from types import SimpleNamespace

    from ortlab.views.lab.history import History, RunRecord, Warnings

    def record(run: int, p50: float, profiled: float, load: float) -> RunRecord:
        prof = SimpleNamespace(median_run_ms=profiled)
        return RunRecord(
            run,
            ortlab.SessionConfig(),
            "none",
            p50,
            p50,
            p50,
            "cpu",
            "",
            1.0,
            other_cores=load,
            placement=SimpleNamespace(profile=prof),
        )

    h = History()
    for r in (record(1, 80.0, 80.0, 0.1), record(2, 28.0, 150.0, 1.0), record(3, 79.0, 81.0, 0.1)):
        h.add(r)
    notes = h.disagreements(1, 2)
    assert any("x0.35" in n and "x1.88" in n for n in notes), notes
    assert any("0.10 cores during run 1 and 1.00 during run 2" in n for n in notes), notes
    items = h.comparison(1, 2)
    assert isinstance(items[-1], Warnings) and "ortlab-warn" in items[-1]._repr_html_()
    assert h.disagreements(1, 3) == [] and len(h.comparison(1, 3)) == 1


def test_history_with_one_run_picks_it_and_says_how_to_compare() -> None:
    """With one run, History's pickers hold it (not blank), Compare is off with a line saying
    how to get a second run, shown above the chart; a second run turns Compare on and picks
    the last two."""
    from ortlab.views.lab.tabcontrols import ONE_RUN

    lab = ortlab.Lab(ortlab.examples.load("mlp"), sync=True, runs=5)
    t = lab.tab_controls
    assert (t.run_a.value, t.run_b.value) == (1, 1) and t.compare_button.disabled
    items = t.history_items(lab.history)
    caption = items.index(t.history_caption)
    assert ONE_RUN.split(":")[0] in t.history_caption.value
    assert caption < next(k for k, x in enumerate(items) if type(x).__name__ == "Figure")
    lab.run()
    assert (t.run_a.value, t.run_b.value) == (1, 2) and not t.compare_button.disabled
    t.history_items(lab.history)
    assert t.history_caption.value == ""


def test_the_tab_table_makes_the_tabs_buttons_status_lines_and_state(lab) -> None:
    """One row per tab (views/lab/tabs.py): the Lab's tabs, their order, each job's button,
    the status lines and the state fields the jobs fill all come from it."""
    from ortlab.views.lab.state import PUBLIC_NAMES, LabState
    from ortlab.views.lab.tabs import TABS, job_tabs, tab_names

    fields = {f.name for f in dataclasses.fields(LabState)}
    assert list(lab.panes) == tab_names(lab.model.decoder is not None)
    assert [lab.tabs.get_title(i) for i in range(len(lab.panes))] == list(lab.panes)
    assert set(lab.tab_controls.status) == set(job_tabs())
    jobs = [job for tab in TABS for job in tab.jobs]
    assert jobs and all(job.field in fields for job in jobs)
    assert all(type(lab.tab_controls.button(job.button)).__name__ == "Button" for job in jobs)
    assert len({job.button for job in jobs}) == len(jobs)  # one button, one job
    assert set(PUBLIC_NAMES.values()) == fields  # every result readable by its public name
    assert "Generate" not in lab.panes and "Generate" in tab_names(True)
