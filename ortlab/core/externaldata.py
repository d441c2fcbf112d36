"""The files beside a model's graph: its external data (every tensor's file inside the model's
folder, its offset and length within that file), checked before any session is built, and the
refusal of external data where there is no folder to hold it (bytes, an in-memory proto)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import onnx
from onnx import TensorProto

from ortlab.core.errors import ExternalDataError
from ortlab.core.onnx_util import tensor_nbytes, walk_initializers

__all__ = ["check_external_data", "data_files", "reject_external"]


def reject_external(proto: onnx.ModelProto, where: str) -> None:
    external = [
        t.name for t in walk_initializers(proto.graph) if t.data_location == TensorProto.EXTERNAL
    ]
    if external:
        raise ExternalDataError(
            f"The model given as {where} refers to external data files ({len(external)} "
            f"tensors, e.g. {external[0]!r}) that ortlab cannot locate without the model's "
            "folder. Load it by path instead: ortlab.load('path/to/model.onnx')."
        )


def check_external_data(proto: onnx.ModelProto, folder: Path) -> int:
    """Verify every external-data reference stays inside ``folder`` and exists; returns bytes."""
    root = folder.resolve()
    total = 0
    sizes: dict[Path, int] = {}
    for tensor in walk_initializers(proto.graph):
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in tensor.external_data}
        location = info.get("location", "")
        where = f"tensor {tensor.name!r} refers to external data {location[:300]!r}"
        target = _external_target(root, location, where)
        if target not in sizes:
            sizes[target] = target.stat().st_size
        offset = _external_int(info, "offset", where)
        length = _external_int(info, "length", where) or tensor_nbytes(tensor)
        if offset + length > sizes[target]:
            raise ExternalDataError(
                f"Truncated external data: {where}, bytes {offset}..{offset + length}, but "
                f"{target.name} has only {sizes[target]} bytes. Copy the data file again."
            )
        total += length
    return total


def _external_target(root: Path, location: str, where: str) -> Path:
    """The data file of one reference: inside ``root``, existing, a regular file."""
    if not location or Path(location).is_absolute() or location.startswith(("/", "\\")):
        raise ExternalDataError(
            f"Refusing to load: {where}, an absolute or empty path. External data must be a "
            f"relative path inside the model's folder {root}."
        )
    try:
        if "\0" in location:
            raise ValueError("the path contains a NUL byte")
        target = (root / location).resolve()
        inside = target.is_relative_to(root)
        is_file, is_dir = (target.is_file(), target.is_dir()) if inside else (False, False)
    except (OSError, ValueError, RuntimeError) as err:  # RuntimeError: a symlink loop (<3.13)
        reason = getattr(err, "strerror", None) or str(err)
        raise ExternalDataError(
            f"Unusable external data path: {where}: {reason}. The model file is damaged or was "
            "edited by hand; re-export it, or put the data file next to the model under a "
            "plain relative name."
        ) from err
    if not inside:
        raise ExternalDataError(
            f"Refusing to load: {where}, which resolves to {target}, outside the model's "
            f"folder {root}. A model must not read files outside its own folder; move the "
            "data file next to the model and fix its location."
        )
    if is_dir:
        raise ExternalDataError(
            f"Unusable external data: {where}, but {target} is a folder, not a data file. "
            "Point the location at the data file that came with the model."
        )
    if not is_file:
        raise ExternalDataError(
            f"Missing external data: {where}, but {target} does not exist. Copy the data "
            "file(s) that came with the model into the same folder as the .onnx file."
        )
    return target


def _external_int(info: Mapping[str, str], key: str, where: str) -> int:
    text = info.get(key, "") or "0"
    if not (text.isascii() and text.isdigit()):  # negative, a word, a float, "²": damaged
        raise ExternalDataError(
            f"Corrupt external data reference: {where} with {key}={text[:40]!r}, which is not "
            "a byte count (an integer >= 0). The model file is damaged or was edited by hand; "
            "re-export it."
        )
    return int(text)


def data_files(proto: onnx.ModelProto, folder: Path) -> list[Path]:
    """The external-data files ``proto``'s tensors name that exist in ``folder``, each once:
    with the model file, what a model weighs on disk."""
    files: list[Path] = []
    for t in walk_initializers(proto.graph):
        for entry in t.external_data:
            if entry.key == "location":
                f = folder / entry.value
                if f.is_file() and f not in files:
                    files.append(f)
    return files
