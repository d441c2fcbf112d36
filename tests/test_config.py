from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import ortlab
from ortlab import SessionConfig
from ortlab.core.errors import ProviderError, SessionConfigError


def test_aliases_and_case() -> None:
    c = SessionConfig(providers=["OpenVINO", "TRT", "cuda", "Cpu"])
    assert c.providers == (
        "OpenVINOExecutionProvider",
        "TensorrtExecutionProvider",
        "CUDAExecutionProvider",
        "CPUExecutionProvider",
    )
    assert SessionConfig(providers=["cpuexecutionprovider"]).providers == ("CPUExecutionProvider",)
    assert SessionConfig(providers="cpu").providers == ("CPUExecutionProvider",)
    assert SessionConfig(providers="auto").providers == "auto"
    assert SessionConfig(providers=["MyPluginExecutionProvider"]).providers == (
        "MyPluginExecutionProvider",
    )


def test_unknown_provider_message() -> None:
    with pytest.raises(ProviderError, match=r"Unknown execution provider 'cudaa'.*cpu, cuda"):
        SessionConfig(providers=["cudaa"])
    with pytest.raises(ProviderError, match="providers is empty"):
        SessionConfig(providers=[])


def test_levels() -> None:
    for given, want in [
        ("ALL", "all"),
        ("ORT_ENABLE_EXTENDED", "extended"),
        (0, "disabled"),
        ("99", "all"),
        ("layout", "layout"),
        ("Basic", "basic"),
    ]:
        assert SessionConfig(level=given).level == want
    with pytest.raises(SessionConfigError, match="Unknown optimization level 'max'.*disabled"):
        SessionConfig(level="max")


def test_bad_values() -> None:
    with pytest.raises(SessionConfigError, match="thread count >= 0"):
        SessionConfig(intra_op_threads=-1)
    with pytest.raises(SessionConfigError, match="'sequential' or 'parallel'"):
        SessionConfig(execution_mode="async")
    with pytest.raises(SessionConfigError, match="integer >= 1"):
        SessionConfig(free_dimension_overrides={"batch": 0})
    with pytest.raises(ProviderError, match="not in providers"):
        SessionConfig(providers=["cpu"], provider_options={"cuda": {"device_id": 0}})
    with pytest.raises(SessionConfigError, match="'warn', 'error' or 'allow'"):
        SessionConfig(fallback="ignore")


def test_frozen_hashable_json_round_trip() -> None:
    c = SessionConfig(
        providers=["cuda", "cpu"],
        provider_options={"cuda": {"device_id": 0, "cudnn_conv_algo_search": "HEURISTIC"}},
        level="extended",
        intra_op_threads=2,
        allow_spinning=False,
        free_dimension_overrides={"batch": 1},
        config_entries={"session.disable_prepacking": "1"},
        io_binding=True,
    )
    assert hash(c) == hash(SessionConfig.from_json(c.to_json()))
    assert SessionConfig.from_json(c.to_json()) == c
    assert {c: 1}[SessionConfig.from_json(c.to_json())] == 1
    with pytest.raises(AttributeError):
        c.level = "all"  # type: ignore[misc]
    assert c.with_(level="all").level == "all" and c.level == "extended"
    assert c.label() == "cuda+cpu · extended · intra=2 · no-spin · iobinding"
    with pytest.raises(SessionConfigError, match="Unknown SessionConfig fields"):
        SessionConfig.from_json('{"lvl": "all"}')


def test_snippet_runs_with_plain_onnxruntime(mlp: ortlab.Model, tmp_path: Path) -> None:
    c = SessionConfig(
        level="extended",
        intra_op_threads=1,
        allow_spinning=False,
        free_dimension_overrides={"batch": 1},
        io_binding=True,
    )
    code = c.snippet(str(mlp.path))
    assert "import ortlab" not in code
    assert "run_with_iobinding" in code
    script = tmp_path / "snippet.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert "CPUExecutionProvider" in out.stdout


@pytest.mark.parametrize(
    "providers, policy",
    [
        (None, "prefer_cpu"),
        (["openvino:NPU", "cpu"], None),
        (["openvino", "cpu"], None),
        (["qnn", "cpu"], None),
        (["cpu"], None),
        ("auto", None),
    ],
)
def test_snippet_rebuilds_the_session_ortlab_measured(
    mlp: ortlab.Model, tmp_path: Path, providers: Any, policy: str | None
) -> None:
    """Policies, plugin EPs and ``ep:DEVICE`` names select devices: a snippet that named them
    in providers= printed a CPU-only session (the one the README warns about), or for a
    policy no selection at all. Each snippet is run and its providers compared with the
    providers of the session ortlab built for the same config."""
    kwargs: dict[str, Any] = {"policy": policy} if policy else {"providers": providers}
    c = SessionConfig(fallback="allow", **kwargs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = ortlab.benchmark(mlp, c, runs=2, warmup=1, progress=False).report
    except ortlab.SessionCreationError as err:  # a policy may pick a registered EP that fails
        assert policy, err
        script = tmp_path / "snippet.py"
        script.write_text(c.snippet(str(mlp.path)))
        out = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, check=False
        )
        assert out.returncode != 0  # the snippet fails the same way, for the same reason
        assert str(err).rsplit(": ", 1)[-1] in out.stderr, out.stderr[-800:]
        return
    code = c.snippet(str(mlp.path), providers=report.requested)
    if policy:  # the policy asked for (an Intel CPU's OpenVINO takes prefer_cpu's session)
        assert f"(ort.OrtExecutionProviderDevicePolicy.{policy.upper()})" in code
    if providers and providers != "auto" and providers[0] in ("openvino", "openvino:NPU", "qnn"):
        assert "add_provider_for_devices" in code and "providers=" not in code
    script = tmp_path / "snippet.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    printed = out.stdout.strip().splitlines()[-1]
    assert printed == str(report.active), (code, out.stderr[-500:])
