"""What the runtime sends away (issue 61, item 4): onnxruntime 1.29+ queues telemetry on Linux in
~/.cache/Microsoft/DeveloperTools/.onnxruntime/onnxruntime.db. ortlab's own processes start
with it off unless the user opts in; ortlab says what it set and what it found. Each test runs
the CLI in a process of its own with a fresh HOME (the runtime reads its switch once, when it
initializes), and looks at what the runtime left there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ortlab.core import telemetry

ROOT = Path(__file__).resolve().parent.parent


def _cli(home: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own with ``home`` as HOME, outside CI as far as the runtime
    can tell: onnxruntime records nothing where CI, GITHUB_ACTIONS or TF_BUILD is set (seen
    with 1.31.1), so under CI the first test would pass whatever ortlab set."""
    drop = (telemetry.DISABLE, telemetry.OPT_IN, *telemetry.CI_MARKERS)
    base = {k: v for k, v in os.environ.items() if k not in drop}
    return subprocess.run(
        [sys.executable, "-m", "ortlab", *argv],
        env={**base, "HOME": str(home), "ORTLAB_CACHE_DIR": str(home / "ortlab"), **env},
        cwd=home,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
def test_a_doctor_leaves_nothing_for_the_runtime_to_send(tmp_path: Path) -> None:
    """A whole doctor (its worker, its children) with a fresh HOME: nothing under
    ~/.cache/Microsoft, and its JSON says what ortlab set."""
    done = _cli(tmp_path, "doctor", "mlp", "--budget", "15", "--no-quantize", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert not (tmp_path / ".cache" / "Microsoft").exists()
    env = json.loads(done.stdout)["data"]["environment"]
    said = env["runtime telemetry"]
    assert f"off ({telemetry.DISABLE}=1 set by ortlab" in said
    assert "no runtime database" in said


@pytest.mark.slow
def test_opted_in_the_runtime_records(tmp_path: Path) -> None:
    """With ORTLAB_ORT_TELEMETRY=1 ortlab leaves the runtime be: its database appears (so the
    test above can fail), and ortlab's environment report says where and how large."""
    done = _cli(tmp_path, "bench", "mlp", "--runs", "3", **{telemetry.OPT_IN: "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    db = telemetry.database(tmp_path)
    assert db.is_file() and db.stat().st_size > 0
    shown = _cli(tmp_path, "providers", "--json", **{telemetry.OPT_IN: "1"})
    said = json.loads(shown.stdout)["runtime_telemetry"]
    assert said["ortlab_processes"].startswith("on")
    assert str(db) in said["database"] and "bytes" in said["database"]


def test_the_users_own_process_is_said_as_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """ortlab never sets the switch in the user's process; it says what the environment has
    (a CI marker included, where the runtime stays silent of its own accord)."""
    for name in telemetry.CI_MARKERS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(telemetry.DISABLE, raising=False)
    assert "the runtime records" in telemetry.state().this_process
    assert telemetry.DISABLE not in os.environ  # reading the state changed nothing
    monkeypatch.setenv("CI", "true")
    assert "CI=true" in telemetry.state().this_process
    monkeypatch.delenv("CI")
    monkeypatch.setenv(telemetry.DISABLE, "1")
    assert telemetry.state().this_process.startswith("off")
    monkeypatch.setenv(telemetry.OPT_IN, "1")
    assert telemetry.child_env() == {}
    monkeypatch.delenv(telemetry.OPT_IN)
    assert telemetry.child_env() == {telemetry.DISABLE: "1"}
