"""Processes that run ortlab's own code with this interpreter: the worker, and the short-lived
children the worker starts where a session must not share a process (a footprint, a QNN
compile). One place for what they need: the package on their path, and a request/answer
exchange through files whose failure says what happened."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ortlab.core import telemetry

if TYPE_CHECKING:
    import numpy as np

    from ortlab.core.config import SessionConfig

__all__ = [
    "ChildFailed",
    "CompileAnswer",
    "CompileAsk",
    "FootprintAnswer",
    "FootprintAsk",
    "SoakAsk",
    "child_env",
    "run_child",
]

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
"""The folder holding the ``ortlab`` package (so ``python -m ortlab…`` finds this copy)."""


class FootprintAsk(TypedDict):
    """The request ``_footprint_child`` reads (pickled): the model, its name and config, the
    file of the pickled feeds and how many runs."""

    model_path: str
    name: str
    config: SessionConfig
    feeds_file: str
    runs: int


class SoakAsk(TypedDict):
    """The request ``_soak_child`` reads (pickled): the model, its config, the setting's two
    arena switches, the feeds and their free dims, the phases and runs a phase, the seed of
    its fresh values."""

    model_path: str
    name: str
    config: SessionConfig
    shrink: bool
    same_as_requested: bool
    feeds: dict[str, np.ndarray]
    dims: dict[str, int]
    shapes: bool
    phases: list[str]
    runs: int
    seed: int


class FootprintAnswer(TypedDict):
    """What ``_footprint_child`` measured (JSON): the fields of ``replies.FootprintSample``."""

    create_ms: float
    created_bytes: int | None
    held_bytes: int | None
    peak_bytes: int | None
    file_bytes: int | None
    error: str


class CompileAsk(TypedDict):
    """The request ``_compile_child`` reads (JSON): the model, the plugin's EP and module, its
    provider options, where to write the EPContext dump and the level-1 graph, how many devices,
    and the session's level and config entries."""

    model_path: str
    ep: str
    module: str
    options: dict[str, str]
    context_path: str
    basic_path: str
    max_devices: int
    level: str
    entries: dict[str, str]


class CompileAnswer(TypedDict):
    """What ``_compile_child`` answers (JSON): the assignment per EP (node, op type), the
    session's providers, the log lines kept, the error ('' when it compiled) and the time."""

    assignment: list[tuple[str, list[tuple[str, str]]]]
    active: list[str]
    log: list[str]
    error: str
    seconds: float


class ChildFailed(Exception):  # noqa: N818 - reads as what happened to the child
    """The child gave no answer: it timed out or died (the message says which)."""


def child_env(*, only_package: bool = False, **extra: str) -> dict[str, str]:
    """This process's environment plus ``extra``, with the package first on PYTHONPATH, and
    ORTLAB_CHILD=1: ``import ortlab`` in a child skips the public namespace (the analyses,
    pandas, the renderers), which no child uses and which would delay its start-up.
    ``only_package``: the package alone on the path and no user site-packages (a child run by
    another environment's interpreter must import that environment's onnxruntime). The
    runtime's telemetry is off there unless the user opted in (:mod:`ortlab.core.telemetry`)."""
    env = {**os.environ, "ORTLAB_CHILD": "1", **telemetry.child_env(), **extra}
    kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_PARENT, *([] if only_package else kept)])
    if only_package:
        env["PYTHONNOUSERSITE"] = "1"
    return env


def run_child(
    argv: Sequence[str], answer: Path, *, cwd: Path, timeout: float, what: str
) -> dict[str, Any]:
    """Run ``argv`` (ortlab's own script or module) and return the JSON it wrote to ``answer``
    (deleted once read). Raises :class:`ChildFailed` naming ``what`` when it took longer than
    ``timeout`` seconds or died without answering (with the tail of its stderr)."""
    try:
        proc = subprocess.run(  # our own code, with this interpreter
            list(argv),
            capture_output=True,
            cwd=cwd,
            timeout=timeout,
            check=False,
            env=child_env(),
        )
    except subprocess.TimeoutExpired as err:
        raise ChildFailed(f"{what} took more than {timeout:.0f} s") from err
    if not answer.exists():
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise ChildFailed(f"{what} died (exit {proc.returncode}): " + " / ".join(tail))
    out: dict[str, Any] = json.loads(answer.read_text())
    answer.unlink()
    return out
