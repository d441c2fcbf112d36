"""Plugin execution providers (onnxruntime-ep-openvino, onnxruntime-qnn): registered in the
worker, selected by device, never the silent CPU-only session ORT gives when a plugin EP is
named in providers=[...]. ./run-tests installs both packages (with --no-deps)."""

from __future__ import annotations

import os
import warnings

import pytest

import ortlab
from ortlab.core.eps import canonical_provider
from ortlab.core.errors import ProviderError, ProviderFallbackWarning, SessionConfigError
from ortlab.engine.plugins import PluginEP
from tests import models


def test_device_names_and_policies_in_the_config() -> None:
    assert canonical_provider("openvino:npu") == "OpenVINOExecutionProvider:NPU"
    assert canonical_provider("QNN:cpu") == "QNNExecutionProvider:CPU"
    with pytest.raises(ProviderError, match="Unknown device 'tpu' in 'openvino:tpu'"):
        canonical_provider("openvino:tpu")
    cfg = ortlab.SessionConfig(
        providers=["openvino:NPU", "cpu"], provider_options={"openvino": {"cache_dir": "/tmp/x"}}
    )
    assert cfg.options_for("OpenVINOExecutionProvider:NPU") == {"cache_dir": "/tmp/x"}
    assert cfg.label().startswith("openvino:NPU+cpu")
    assert ortlab.SessionConfig(policy="PREFER_NPU").label().startswith("policy=prefer_npu")
    with pytest.raises(SessionConfigError, match="policy='fastest': use one of default"):
        ortlab.SessionConfig(policy="fastest")


def _plugins() -> dict[str, PluginEP]:
    return {p.name: p for p in ortlab.providers().plugins}


def test_installed_plugins_are_registered_in_the_worker() -> None:
    plugins = _plugins()
    if not plugins and not os.environ.get("CI"):
        pytest.skip("no plugin EP package installed (./run-tests installs them)")
    assert {"OpenVINOExecutionProvider", "QNNExecutionProvider"} <= set(plugins)
    assert all(not p.error for p in plugins.values()), plugins
    assert "CPU" in plugins["QNNExecutionProvider"].devices  # its HTP compiler runs here


@pytest.mark.parametrize("provider", ["openvino", "openvino:NPU", "qnn:NPU"])
def test_a_plugin_ep_named_in_providers_is_never_a_silent_cpu_session(provider: str) -> None:
    """Plain ORT gives a CPU-only session without a word; ortlab selects the plugin's device
    or says why it could not (naming the package and the devices it listed)."""
    plugins = _plugins()
    if not plugins and not os.environ.get("CI"):
        pytest.skip("no plugin EP package installed")
    cfg = ortlab.SessionConfig(providers=[provider, "cpu"])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        b = ortlab.benchmark(models.add(), cfg, runs=1, warmup=0, progress=False)
    ep = canonical_provider(provider).split(":")[0]
    if ep in b.report.active:  # a machine where the plugin has that device
        assert not b.report.missing
        return
    (issue,) = b.report.missing
    assert "plugin is registered but lists no" in issue.reason, issue.reason
    assert plugins[ep].module in issue.reason
    assert any(issubclass(w.category, ProviderFallbackWarning) for w in seen)


def test_a_missing_plugin_package_names_the_install_command() -> None:
    cfg = ortlab.SessionConfig(providers=["VitisAIExecutionProvider:NPU", "cpu"])
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        b = ortlab.benchmark(models.add(), cfg, runs=1, warmup=0, progress=False)
    (issue,) = b.report.missing
    assert "VitisAIExecutionProvider" in issue.provider and "no NPU device here" in issue.reason
