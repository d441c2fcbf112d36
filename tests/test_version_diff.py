"""ortlab.version_diff: one model under two onnxruntime versions, each in a virtual environment
built once from PyPI.

The environments go to the tests' shared folder (:mod:`tests.pypi`).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import ortlab
from ortlab.analysis.diff import diff
from ortlab.analysis.versions import VersionDiffResult, _fusion, _inserted
from ortlab.cli import main
from ortlab.core.errors import VersionInstallError
from ortlab.engine import venvs
from tests import pypi as pypi_env

pytestmark = pytest.mark.slow
pypi = pytest.mark.pypi

A, B = pypi_env.A, pypi_env.B
_need = pypi_env.need


@pytest.fixture(scope="module", autouse=True)
def venv_dir() -> Iterator[Path]:
    yield from pypi_env.venv_folder()


@pypi
def test_a_version_that_cannot_be_installed_says_what_is_available() -> None:
    _need()
    with pytest.raises(VersionInstallError) as info:
        ortlab.version_diff(ortlab.examples.load("mlp"), versions=["0.0.1", A])
    text = str(info.value)
    assert "onnxruntime==0.0.1" in text
    assert "Versions available here" in text and A in text  # what is there, to pick from
    assert "pip's last lines" in text
    assert not venvs.env_dir("0.0.1").exists()  # the half-built environment is removed


def test_no_network_is_said_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    """A closed port as the index: pip cannot connect, and the error says so and how to fix."""
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    with pytest.raises(VersionInstallError) as info:
        venvs.interpreter("1.0.0")
    text = str(info.value)
    assert "could not be reached" in text and "PIP_INDEX_URL" in text
    assert not venvs.env_dir("1.0.0").exists()


def test_a_malformed_version_is_refused_before_pip() -> None:
    with pytest.raises(VersionInstallError, match="not an onnxruntime version"):
        venvs.interpreter("1.31; rm -rf /")


def test_pip_output_becomes_what_failed_and_what_is_available() -> None:
    out = (
        "ERROR: Could not find a version that satisfies the requirement onnxruntime==9.9 "
        "(from versions: 1.30.0, 1.31.0, 1.31.1, 1.32.0)\n"
        "ERROR: No matching distribution found for onnxruntime==9.9"
    )
    text = venvs._pip_failure("9.9", out)
    assert "no onnxruntime 9.9 wheel" in text and "1.31.1, 1.32.0" in text
    assert text.rstrip().endswith("No matching distribution found for onnxruntime==9.9")


@pypi
def test_the_environment_is_built_once_and_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    _need(A)
    python = venvs.interpreter(A)
    record = venvs.installed(A)
    assert record is not None and record["onnxruntime"] == A
    built = (venvs.env_dir(A) / venvs.MARKER).read_text()

    def rebuild(*_a: object, **_k: object) -> None:
        raise AssertionError("the environment was built again")

    monkeypatch.setattr(venvs, "_build", rebuild)
    t0 = time.perf_counter()
    assert venvs.interpreter(A) == python
    assert time.perf_counter() - t0 < 1.0
    assert (venvs.env_dir(A) / venvs.MARKER).read_text() == built
    out = subprocess.run(
        [str(python), "-c", "import onnxruntime; print(onnxruntime.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == A


@pypi
def test_a_version_against_itself_finds_no_shift(resnet50: ortlab.Model) -> None:
    """An A/A test: two workers of one version. The kernels and fusions are the same, and the
    shift's interval covers 0 on at least 90 % of the timed nodes on an idle machine. On a busy
    one (another process burning a core, as CI may be) the sessions are no longer alike — the
    load moves between them — and a quarter of the nodes were seen to shift: then the result
    must say the machine was busy, and most nodes still cover 0."""
    _need(A)
    r = ortlab.version_diff(resnet50, versions=[A, A], progress=False)
    assert r.loaded == [A, A]
    from ortlab.analysis.diff import TIMED_VERDICTS

    t = r.to_pandas()
    timed = t[t["verdict"].isin(TIMED_VERDICTS)]
    assert len(timed) > 0.9 * len(t)
    # the load each session ran under, measured in the sessions' own workers, is said
    assert any(n.startswith("machine load: other processes used") for n in r.notes), r.notes
    covers = (timed["low"] <= 0) & (timed["high"] >= 0)
    quiet = timed["verdict"] == "no measurable difference"
    busy = any("while this was measured" in n for n in r.notes)
    floor = 0.6 if busy else 0.9
    assert covers.mean() >= floor and quiet.mean() >= floor, (covers.mean(), quiet.mean(), r.notes)
    assert not t["kernel_changed"].any() and not t["fusion_changed"].any()
    assert all(k.a_count == k.b_count for k in r.inserted)


@pypi
def test_two_versions_per_node(resnet50: ortlab.Model) -> None:
    _need(A, B)
    t0 = time.perf_counter()
    r = ortlab.version_diff(resnet50, versions=[A, B], progress=False)
    print(f"version_diff resnet50 {A} vs {B}: {time.perf_counter() - t0:.1f} s")
    assert r.versions == [A, B] and r.loaded == [A, B]  # each worker runs the version asked
    t = r.to_pandas()
    assert set(t["node"]) == {n.name for n in resnet50.nodes}  # matched by name
    from ortlab.analysis.diff import TIMED_VERDICTS  # 'within noise' is a timed verdict too

    timed = t[t["verdict"].isin(TIMED_VERDICTS)]
    assert len(timed) > 0.9 * len(t)
    assert (timed["a_kernel"] != "").all() and (timed["b_kernel"] != "").all()
    assert np.isfinite(timed[["low", "high"]].to_numpy()).all()
    # a verdict agrees with the two sides' own medians (not only with its own interval)
    slower, faster = timed[timed["verdict"] == "slower"], timed[timed["verdict"] == "faster"]
    assert (slower["b_us"] > slower["a_us"]).all() and (faster["b_us"] < faster["a_us"]).all()
    assert r.as_diff().label_b == f"onnxruntime {B}"
    again = ortlab.VersionDiffResult.from_json(r.to_json())
    assert again.to_pandas().equals(t) and again.loaded == r.loaded
    assert A in r.to_text() and B in r._repr_html_()
    assert len(r.plot().data) == 1


@pypi
def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    _need(A, B)
    code = main(
        ["version-diff", "mlp", "--versions", f"{A},{B}", "--rounds", "2", "--runs", "4", "--json"]
    )
    assert code == 0
    r = ortlab.VersionDiffResult.from_json(capsys.readouterr().out)
    assert r.loaded == [A, B] and r.rounds == 2 and r.diff.runs_a == 2  # sessions
    assert main(["version-diff", "mlp", "--versions", A]) == 2  # one version: a usage error
    assert "two onnxruntime versions" in capsys.readouterr().err
    assert json.loads(r.to_json())["ortlab"] == "VersionDiffResult"


def test_kernel_and_fusion_changes_are_found(resnet50: ortlab.Model) -> None:
    """Two placements that differ as two versions might (level basic against all: NCHWc Conv
    kernels, Relu fused into the Conv, reorders inserted), read as a version diff."""
    a = ortlab.placement(resnet50, {"level": "basic"}, runs=4, progress=False)
    b = ortlab.placement(resnet50, {"level": "all"}, runs=4, progress=False)
    r = VersionDiffResult(
        model=resnet50.name,
        versions=["x", "y"],
        loaded=["x", "y"],
        diff=diff(a, b),
        fusion=_fusion(a, b),
        inserted=_inserted([a], [b]),
        rounds=1,
        runs_per_round=4,
    )
    t = r.to_pandas().set_index("node")
    conv = t[t["op_type"] == "Conv"]
    assert (conv["a_domain"] == "").all() and (conv["b_domain"] == "com.microsoft.nchwc").all()
    assert conv["kernel_changed"].all()
    relu = t[t["op_type"] == "Relu"]
    assert relu["fusion_changed"].all() and (relu["b_status"] == "fused").all()
    assert r.summary()["kernel_changed"] >= len(conv)
    reorders = {k.op_type: k for k in r.inserted}
    assert reorders["ReorderOutput"].a_count == 0 and reorders["ReorderOutput"].b_count > 0
    text = r.to_text()
    assert "(com.microsoft.nchwc)" in text and "ReorderOutput" in text
