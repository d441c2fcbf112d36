"""The workshop notebooks, as the package carries them: inside an installed wheel they are
``ortlab/notebooks/`` (the wheel's build puts the repository's ``notebooks/`` there); in a
source checkout they are the checkout's ``notebooks/``. :func:`copy_notebooks` copies them
out to a folder a person opens in JupyterLab (``ortlab notebooks DIR``), never over a file
that is already there unless asked."""

from __future__ import annotations

import shutil
from pathlib import Path

from ortlab.core.errors import OrtlabError

__all__ = ["NotebooksError", "copy_notebooks", "notebooks_dir"]


class NotebooksError(OrtlabError, OSError):
    """The notebooks cannot be found or copied (what, where and how to fix it are said)."""


def notebooks_dir() -> Path:
    """Where this installation's notebooks are: the package's own (a wheel), else the source
    checkout's."""
    here = Path(__file__).resolve().parents[1]
    for folder in (here / "notebooks", here.parent / "notebooks"):
        if any(folder.glob("*.ipynb")):
            return folder
    raise NotebooksError(
        f"No workshop notebooks found in {here / 'notebooks'} or {here.parent / 'notebooks'}: "
        "this installation was built without them. Reinstall ortlab from its wheel or its "
        "source checkout."
    )


def copy_notebooks(
    dest: str | Path, *, overwrite: bool = False, replace_hint: str = "pass overwrite=True"
) -> list[Path]:
    """Copy every workshop notebook into ``dest`` (created if missing) and return the copies.
    A notebook already in ``dest`` is never replaced unless ``overwrite``: nothing is copied
    and the error names the files (your edits stay yours) and ``replace_hint``, how the
    caller's user replaces them (the CLI's: its --force)."""
    source = notebooks_dir()
    target = Path(dest).expanduser()
    if target.exists() and not target.is_dir():
        raise NotebooksError(f"{target} is a file: give a folder to copy the notebooks into.")
    names = sorted(p.name for p in source.glob("*.ipynb"))
    there = [n for n in names if (target / n).exists()]
    if there and not overwrite:
        raise NotebooksError(
            f"{len(there)} of the notebooks are already in {target} ({', '.join(there[:3])}"
            f"{', …' if len(there) > 3 else ''}): nothing was copied, so your edits are kept. "
            f"Choose another folder, or {replace_hint} to replace them."
        )
    try:
        target.mkdir(parents=True, exist_ok=True)
        return [Path(shutil.copyfile(source / n, target / n)) for n in names]
    except OSError as err:
        raise NotebooksError(f"Could not copy the notebooks to {target}: {err}") from err
