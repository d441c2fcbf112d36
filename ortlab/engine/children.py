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
from typing import Any

__all__ = ["ChildFailed", "child_env", "run_child"]

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
"""The folder holding the ``ortlab`` package (so ``python -m ortlab…`` finds this copy)."""


class ChildFailed(Exception):  # noqa: N818 - reads as what happened to the child
    """The child gave no answer: it timed out or died (the message says which)."""


def child_env(*, only_package: bool = False, **extra: str) -> dict[str, str]:
    """This process's environment plus ``extra``, with the package first on PYTHONPATH, and
    ORTLAB_CHILD=1: ``import ortlab`` in a child skips the public namespace (the analyses,
    pandas, the renderers), which no child uses and which would delay its start-up.
    ``only_package``: the package alone on the path and no user site-packages (a child run by
    another environment's interpreter must import that environment's onnxruntime)."""
    env = {**os.environ, "ORTLAB_CHILD": "1", **extra}
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
