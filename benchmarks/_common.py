"""Shared helpers for the benchmark scripts: machine info and recording results."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def machine() -> dict[str, str]:
    from ortlab.analysis.benchmark import environment

    info = environment()
    info["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return info


def record(name: str, data: dict[str, Any], markdown: str) -> Path:
    """Write results/<name>.json and results/<name>.md and print the markdown."""
    RESULTS.mkdir(exist_ok=True)
    payload = {"benchmark": name, "machine": machine(), **data}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    env = payload["machine"]
    header = (
        f"_{env['date']} · {env['cpu']} ({env['cpu_count']} CPUs) · onnxruntime "
        f"{env['onnxruntime']} · ortlab {env['ortlab']}_\n\n"
    )
    (RESULTS / f"{name}.md").write_text(f"# {name}\n\n{header}{markdown}\n")
    print(header + markdown)
    return path
