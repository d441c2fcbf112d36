"""Regenerate the stored OpenVINO placement fixture (run in the OpenVINO venv):

    .venv-openvino/bin/python tests/data/placement/make_fixture.py

It runs ortlab's placement task on the bundled ``nan_guard_cnn`` with the OpenVINO EP and
stores what the three sources said: the raw ORT profile, the assignment info, the verbose
placement block and the EPContext graph. tests/test_placement.py replays it in the main venv.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import onnxruntime as ort

import ortlab
from ortlab.core.run import ModelJob
from ortlab.engine.calls import tasks

HERE = Path(__file__).parent
VERSION = ort.__version__


def main() -> None:
    m = ortlab.examples.load("nan_guard_cnn")
    feeds = dict(m.example_inputs())
    cfg = ortlab.SessionConfig(providers=["openvino", "cpu"])
    kept: dict[str, Path] = {}
    original = tasks.parse_profile_file

    def keep(path: str, skip_runs: int = 0):
        target = HERE / f"ov-{VERSION}_nan_guard_cnn_profile.json"
        shutil.copy(path, target)
        kept["profile"] = target
        return original(path, skip_runs=skip_runs)

    tasks.parse_profile_file = keep  # type: ignore[assignment]
    out = tasks.placement(
        lambda *_: None,
        ModelJob(str(m.path), m.name, cfg, feeds),
        runs=3,
        warmup=1,
    )
    fixture = {
        "onnxruntime": VERSION,
        "warmup": 1,
        "active": out["report"].active,
        "assignment": out["assignment"],
        "placements": out["placements"],
        "final": out["final"],
        "final_source": out["final_source"],
    }
    (HERE / f"ov-{VERSION}_nan_guard_cnn.json").write_text(json.dumps(fixture, indent=1) + "\n")
    print("wrote", kept["profile"].name, "and the assignment fixture")


if __name__ == "__main__":
    main()
