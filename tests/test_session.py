from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import onnxruntime as ort
import pytest

import ortlab
from ortlab.core.errors import ProviderFallbackError, ProviderFallbackWarning
from ortlab.engine.session import auto_providers, build_session, clean_ort_message
from tests import models


def test_silent_cuda_fallback_is_reported(mlp: ortlab.Model) -> None:
    cfg = ortlab.SessionConfig(providers=["cuda", "cpu"], fallback="allow")
    _, report = build_session(str(mlp.path), cfg, model_name="mlp")
    assert report.requested == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert report.active == ["CPUExecutionProvider"]
    assert report.fallback
    (issue,) = report.missing
    assert issue.provider == "CUDAExecutionProvider"
    if "CUDAExecutionProvider" in ort.get_available_providers():
        assert "ORT said:" in issue.reason and "cuda" in issue.reason.lower()
    else:
        assert "not part of this onnxruntime build" in issue.reason
    assert "did not load" in report.summary()


def _cannot_load_here() -> tuple[str, str]:
    """An EP that cannot load on this machine, short and full: OpenVINO where its plugin lists
    no device (an AMD CPU) or is missing, else CUDA (no GPU here or in CI)."""
    chosen, _ = auto_providers()
    for short, full in (
        ("openvino", "OpenVINOExecutionProvider"),
        ("cuda", "CUDAExecutionProvider"),
    ):
        if full not in chosen:
            return short, full
    pytest.skip("OpenVINO and CUDA both load here")


def test_fallback_warns_or_raises(mlp: ortlab.Model) -> None:
    short, _ = _cannot_load_here()
    with pytest.warns(ProviderFallbackWarning, match=rf"\['{short}'\] did not load for 'mlp'"):
        ortlab.benchmark(
            mlp, ortlab.SessionConfig(providers=[short, "cpu"]), runs=1, progress=False
        )
    with pytest.raises(ProviderFallbackError, match="fallback='error'"):
        build_session(
            str(mlp.path),
            ortlab.SessionConfig(providers=[short, "cpu"], fallback="error"),
            model_name="mlp",
        )


def test_fallback_reaches_benchmark_results(mlp: ortlab.Model) -> None:
    short, full = _cannot_load_here()
    with pytest.warns(ProviderFallbackWarning):
        b = ortlab.benchmark(mlp, {"providers": [short, "cpu"]}, runs=3, progress=False)
    assert b.report.missing[0].provider == full
    reason = b.report.missing[0].reason
    if full == "CUDAExecutionProvider":  # in this build (onnxruntime-gpu), no GPU here
        assert "ORT said:" in reason and "cuda" in reason.lower(), reason
    elif importlib.util.find_spec("onnxruntime_ep_openvino"):  # the plugin, with no device here
        assert "onnxruntime_ep_openvino" in reason and "lists no device" in reason, reason
    else:
        assert "onnxruntime-ep-openvino" in reason or "onnxruntime-openvino" in reason, reason
    assert "FALLBACK" in b.to_text()


def test_ort_output_is_captured_not_leaked(capfd: pytest.CaptureFixture[str]) -> None:
    m = ortlab.load(models.initializers_as_inputs(7))
    _, report = build_session(str(m.path), ortlab.SessionConfig(), model_name="m")
    out, err = capfd.readouterr()
    assert "appears in graph inputs" not in out + err, "ORT's fd-2 lines must be captured"
    (note,) = report.notes
    assert "7 initializers (e.g. w0) also appear as graph inputs" in note


def test_auto_picks_loadable_providers() -> None:
    chosen, reasons = auto_providers()
    assert chosen[-1] == "CPUExecutionProvider"
    assert any(r.startswith("cpu:") for r in reasons)
    for ep in ort.get_available_providers():
        if ep not in chosen and ep != "CPUExecutionProvider":
            assert any("cannot load here" in r for r in reasons)
    b = ortlab.benchmark(ortlab.load(models.add()), {"providers": "auto"}, runs=2, progress=False)
    assert b.report.auto_reasons == reasons


def test_auto_takes_a_plugin_ep_exactly_where_a_session_loads_it(mlp: ortlab.Model) -> None:
    """Each registered plugin EP (OpenVINO, QNN) is in auto's choice exactly where ortlab's
    own session for that EP runs on it (the trial once named it in providers=, where a plugin
    EP never loads, so an Intel CPU's OpenVINO was said to fail); a plugin's meta-device
    (OpenVINO's .AUTO) is said, not offered."""
    from ortlab.engine.plugins import registered

    chosen, reasons = auto_providers()
    plugins = [p for p in registered() if not p.error]
    if not plugins:
        pytest.skip("no plugin EP is installed")
    for p in plugins:
        cfg = ortlab.SessionConfig(providers=[p.name, "cpu"], fallback="allow")
        _, report = build_session(str(mlp.path), cfg, model_name="mlp")
        assert (p.name in report.active) == (p.name in chosen), (p.name, p.devices, reasons)
        if p.name not in report.active:  # a plugin whose factory fails names no EP in its log
            (issue,) = [i for i in report.missing if i.provider == p.name]
            assert "no reason" not in issue.reason, issue.reason
    assert not any("said: no reason" in r for r in reasons), reasons
    for ep in ort.get_available_providers():
        if "." in ep:
            assert ep not in chosen
            assert any(r.startswith(f"{ep}:") and "meta-device" in r for r in reasons), ep


def test_clean_ort_message() -> None:
    raw = (
        "[ONNXRuntimeError] : 1 : FAIL : /onnxruntime_src/onnxruntime/core/graph/model.cc:256 "
        "onnxruntime::Model::Model(onnx::ModelProto&&, const onnxruntime::PathString&) "
        "Unsupported model IR version: 14, max supported IR version: 13"
    )
    assert (
        clean_ort_message(raw) == "Unsupported model IR version: 14, max supported IR version: 13"
    )
    nested = (  # a plugin EP's factory failing, as ORT 1.31 logs it
        "EP Error /onnxruntime_src/onnxruntime/core/session/plugin_ep/"
        "ep_plugin_provider_interfaces.cc:71 virtual std::unique_ptr<onnxruntime::"
        "IExecutionProvider> onnxruntime::PluginExecutionProviderFactory::CreateProvider(const "
        "OrtSessionOptions&, const OrtLogger&) Error creating execution provider: "
        "[ONNXRuntimeError] : 1 : FAIL : Could not determine default backend path for device"
    )
    assert clean_ort_message(nested) == (
        "Error creating execution provider: Could not determine default backend path for device"
    )


def test_session_creation_failure_is_wrapped() -> None:
    """A model ORT rejects at creation: the error names the model and the config."""
    from onnx import TensorProto, helper

    bad = models.make(
        [helper.make_node("Add", ["x", "x"], ["y"], name="add")],
        [models.vi("x", TensorProto.FLOAT)],
        [models.vi("y", TensorProto.INT64)],  # wrong output type: ORT refuses
    )
    with pytest.raises(ortlab.OrtlabError, match=r"'g' with cpu · all"):
        ortlab.benchmark(bad, runs=1, progress=False)


def test_no_python_warning_noise(mlp: ortlab.Model) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build_session(str(mlp.path), ortlab.SessionConfig(), model_name="mlp")


_LOG = (Path(__file__).parent / "data" / "session_stages.log").read_text()


def test_creation_stages_from_orts_log_timestamps() -> None:
    """A verbose log in ORT 1.31's format that crosses midnight: a transformer's time runs
    from its 'Applying' line to its 'modified' line, summed over steps; one run outside the
    manager (no 'Applying' line) is not guessed, its gap stays with partition & plan."""
    from ortlab.engine.session import session_stages

    stages, own = session_stages(_LOG.splitlines())
    assert own == pytest.approx({"EnsureUniqueDQForNodeUnit": 0.0, "ConstantFolding": 40.0})
    assert stages == pytest.approx(
        {"load": 50.0, "optimize": 40.0, "partition & plan": 30.0, "initializers & kernels": 30.0}
    )
    info_only = [ln for ln in _LOG.splitlines() if "[V:" not in ln]
    _, own = session_stages(info_only)  # no start lines: since the line before, an upper bound
    assert own["EnsureUniqueDQForNodeUnit"] == pytest.approx(10.0)
    assert own["ConstantFolding"] == pytest.approx(40.0 + 11.0)
    assert session_stages(info_only[1:]) == ({}, {}), "no landmarks, no stages"


def test_creation_stages_add_up_to_the_measured_build() -> None:
    """On a real model the stages cover the session's whole construction, which ortlab timed
    with its own clock around the constructor."""
    m = ortlab.examples.load("resnet50")
    _, r = build_session(str(m.path), ortlab.SessionConfig(), log_severity=0)
    total = sum(r.stages_ms.values())
    assert 0.8 * r.create_ms <= total <= r.create_ms, (r.stages_ms, r.create_ms)
    assert set(r.fired) <= set(r.transformer_ms)
    assert r.transformer_ms["NchwcTransformer"] > 0  # fired on this CNN, so it took time
    assert "session creation: load" in r.to_text()
