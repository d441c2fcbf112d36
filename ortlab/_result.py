"""The result contract shared by every ortlab result.

A result is a frozen dataclass of plain data. ``to_json()`` wraps it in a small envelope (type,
schema version, ortlab version) so a result attached to a bug report reopens with
``Type.from_json(text)`` on a machine without ORT. msgspec does the (de)serialisation from the
dataclass type hints, so nested results and typed containers round-trip exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from ortlab.errors import OrtlabError

SCHEMA = 1
R = TypeVar("R", bound="Result")


class ResultFormatError(OrtlabError, ValueError):
    """A JSON document is not the ortlab result it was read as."""


def _numpy_to_builtin(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise NotImplementedError(f"ortlab results cannot hold {type(obj).__name__}")


class Result:
    """Mixin for frozen-dataclass results: JSON round-trip and file save/load."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = msgspec.to_builtins(self, enc_hook=_numpy_to_builtin)
        return data

    def to_json(self, indent: int | None = None) -> str:
        from ortlab import __version__

        envelope = {
            "ortlab": type(self).__name__,
            "schema": SCHEMA,
            "ortlab_version": __version__,
            "data": self.to_dict(),
        }
        return json.dumps(envelope, indent=indent, allow_nan=True)

    @classmethod
    def from_json(cls: type[R], text: str | bytes) -> R:
        try:
            envelope = json.loads(text)
        except json.JSONDecodeError as err:
            raise ResultFormatError(f"Not JSON, so not an ortlab {cls.__name__}: {err}") from err
        kind = envelope.get("ortlab") if isinstance(envelope, dict) else None
        if kind != cls.__name__:
            raise ResultFormatError(
                f"This JSON holds an ortlab {kind!r}, not a {cls.__name__}; open it with "
                f"ortlab.{kind}.from_json(...)."
                if kind
                else f"This JSON is not an ortlab result (no 'ortlab' key); expected "
                f"{cls.__name__}."
            )
        try:
            return msgspec.convert(envelope["data"], type=cls, strict=False)
        except (msgspec.ValidationError, KeyError) as err:
            raise ResultFormatError(f"Malformed {cls.__name__} JSON: {err}") from err

    def save(self, path: str | Path) -> Path:
        out = Path(path)
        out.write_text(self.to_json())
        return out

    @classmethod
    def load(cls: type[R], path: str | Path) -> R:
        return cls.from_json(Path(path).read_text())
