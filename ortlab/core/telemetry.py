"""What the runtime records about the sessions ortlab opens, and what ortlab set about it.

onnxruntime 1.29+ records telemetry on Linux (PR #27379): each session's model file name, graph
name, producer, opsets and EPs, and error messages that name nodes, queued in a local database
for upload. ortlab opens hundreds of sessions on people's own models, in its worker and its
children: those processes start with ``ORT_DISABLE_TELEMETRY=1`` (read once, when the runtime
initializes) unless the user opts in with ``ORTLAB_ORT_TELEMETRY=1``. The user's own process,
where they import onnxruntime themselves, is theirs: ortlab says what it finds there and
changes nothing.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CI_MARKERS",
    "DISABLE",
    "OPT_IN",
    "Telemetry",
    "child_env",
    "ci_marker",
    "database",
    "state",
]

DISABLE = "ORT_DISABLE_TELEMETRY"
"""The runtime's own switch: '1' in the environment before it initializes turns it off."""
OPT_IN = "ORTLAB_ORT_TELEMETRY"
"""'1' lets the runtime record in ortlab's processes too (the environment they inherit)."""


CI_MARKERS = ("CI", "GITHUB_ACTIONS", "TF_BUILD")
"""Variables under which onnxruntime 1.31.1 records nothing of its own accord (CI=false
does not count): seen here, each alone, with a fresh HOME."""


def ci_marker() -> str:
    """'CI=true' where a CI marker is set (the runtime then stays silent), else ''."""
    for name in CI_MARKERS:
        value = os.environ.get(name, "")
        if value and value.strip().lower() not in ("0", "false", "no"):
            return f"{name}={value}"
    return ""


def opted_in() -> bool:
    return os.environ.get(OPT_IN, "").strip().lower() in ("1", "true", "yes", "on")


def child_env() -> dict[str, str]:
    """What ortlab adds to the environment of a process it starts that may run onnxruntime:
    the runtime's telemetry off, unless the user opted in (then the inherited one stands)."""
    return {} if opted_in() else {DISABLE: "1"}


def database(home: Path | None = None) -> Path:
    """Where onnxruntime 1.29+ queues its events on Linux."""
    base = Path.home() if home is None else home
    return base / ".cache" / "Microsoft" / "DeveloperTools" / ".onnxruntime" / "onnxruntime.db"


@dataclass(frozen=True)
class Telemetry:
    """What ortlab set for its own processes and what it found in the user's."""

    ortlab_processes: str
    """'off (ORT_DISABLE_TELEMETRY=1)' or 'on (ORTLAB_ORT_TELEMETRY=1: the runtime records)'."""
    this_process: str
    """Whether the runtime in the user's process records: their environment, said as found."""
    database: str
    """The runtime's local database: its path and size, or that there is none."""

    def line(self) -> str:
        return (
            f"ortlab's worker and children: {self.ortlab_processes}; this process: "
            f"{self.this_process}; {self.database}"
        )


def _this_process() -> str:
    switch = os.environ.get(DISABLE)
    loaded = "onnxruntime" in sys.modules
    if switch == "1":
        return f"off ({DISABLE}=1 in its environment)"
    ci = ci_marker()
    if ci:
        return f"off: the runtime records nothing where {ci} is set (its own rule)"
    where = "imported here" if loaded else "if imported here"
    return (
        f"the runtime records ({where}; {DISABLE} is not 1 in this process's environment, "
        "which ortlab leaves as it is)"
    )


def state(home: Path | None = None) -> Telemetry:
    """What is true now: ortlab's setting, the user's process, the database on disk."""
    mine = (
        f"on ({OPT_IN}=1: the runtime records and may upload)"
        if opted_in()
        else f"off ({DISABLE}=1 set by ortlab; {OPT_IN}=1 to let it record)"
    )
    db = database(home)
    try:
        size = db.stat().st_size
    except OSError:
        found = f"no runtime database at {db}"
    else:
        found = f"the runtime's database {db} holds {size:,} bytes (events queued for upload)"
    return Telemetry(mine, _this_process(), found)
