"""The Lab's runs without a widget (ortlab.analysis.labrun): a Choice in, a LabRun out."""

from __future__ import annotations

import subprocess
import sys

import onnx
import onnxruntime as ort

import ortlab
from ortlab.analysis.labrun import Choice, LabRunner


def test_the_runner_imports_no_widget_library() -> None:
    code = "import sys, ortlab.analysis.labrun; print('ipywidgets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_choice_runs_its_variant_built_once_at_its_settings(mlp: ortlab.Model) -> None:
    """The variant a choice names is built once (the same model object the next time), is
    what ran (its file holds the int8 ops, read with onnx; plain onnxruntime loads it), at
    the choice's settings, with the choice's number of timed runs."""
    runner = LabRunner(mlp)
    cfg = ortlab.SessionConfig(level="basic", intra_op_threads=1, fallback="allow")
    choice = Choice(config=cfg, variant="dynamic int8", runs=7)
    done = runner.run(choice)
    ops = {n.op_type for n in onnx.load(str(done.model.path)).graph.node}
    assert "DynamicQuantizeLinear" in ops and done.model.path != mlp.path
    ort.InferenceSession(str(done.model.path), providers=["CPUExecutionProvider"])
    assert done.placement.config == cfg and done.benchmark.config == cfg
    assert done.benchmark.stats.count == 7
    assert runner.variant_model(choice) is done.model  # built once
    per_channel = Choice(config=cfg, variant="dynamic int8", per_channel=True)
    assert per_channel.variant_key == "dynamic int8 per-channel"
    assert runner.variant_model(per_channel) is not done.model
    assert runner.variant_model(Choice(config=cfg)) is mlp  # "none": the model itself
    seen: list[str] = []
    runner.run(Choice(config=cfg, runs=5), step=seen.append)
    assert seen == ["placement", "the benchmark"]
