"""The result contract shared by every ortlab result.

A result is a frozen dataclass of plain data. ``to_json()`` wraps it in a small envelope (type,
schema version, ortlab version) so a result attached to a bug report reopens with
``Type.from_json(text)`` on a machine without ORT. msgspec does the (de)serialisation from the
dataclass type hints, so nested results and typed containers round-trip exactly.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import msgspec

from ortlab.core import display
from ortlab.core.errors import OrtlabError
from ortlab.core.record import Provenance
from ortlab.core.version import __version__

if TYPE_CHECKING:
    import plotly.graph_objects as go

SCHEMA = 2
"""2: the record of where it was measured (``record``: :class:`ortlab.core.record.Provenance`,
docs/records.md) beside the data; 1 (read too): the data alone."""
R = TypeVar("R", bound="Result")
S = TypeVar("S")

Table: TypeAlias = Any
"""A pandas DataFrame, as every result's tables are (``nodes``, ``to_pandas()``,
``by_layer()``…). Any to the type checker on purpose, the one place it is said: pandas-stubs
types each cell read from a frame as a twenty-way union (str | bytes | date | … | Interval), so
every figure a caller reads would need a cast (tried: 532 errors across 21 modules); each
table's docstring names its columns instead."""


def table(build: Callable[[S], Table]) -> property:
    """A result's table as a property: built once per result, handed out as a **copy** —
    editing the frame you got never changes the result, and the next access gives the
    result's own table again (keep ``t = result.nodes`` to edit it)."""
    key = f"_table_{build.__name__}"

    @functools.wraps(build)
    def get(self: S) -> Table:
        cached = self.__dict__.get(key)
        if cached is None:
            cached = build(self)
            self.__dict__[key] = cached  # frozen dataclass: its fields stay untouched
        return cached.copy()

    get.__doc__ = (build.__doc__ or "").rstrip() + "\n\n(A copy: edits do not change the result.)"
    return property(get)


class ResultFormatError(OrtlabError, ValueError):
    """A JSON document is not the ortlab result it was read as."""


def _numpy_to_builtin(obj: object) -> object:
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise NotImplementedError(f"ortlab results cannot hold {type(obj).__name__}")


class Result:
    """Mixin for frozen-dataclass results: JSON round-trip, file save/load, and display through
    the renderers ``ortlab.views`` registers (:mod:`ortlab.core.display`): ``_repr_html_`` for
    notebooks, ``to_text`` for terminals, ``plot(kind)`` for a plotly figure."""

    def _repr_html_(self) -> str:
        return str(display.render(self, "html"))

    def to_text(self, **options: object) -> str:
        """Plain text for terminals (what the CLI prints)."""
        return str(display.render(self, "text", **options))

    def plot(self, kind: str | None = None, **options: object) -> go.Figure:
        """A plotly figure of this result; ``kind`` picks among the figures the type has (see
        its class docstring), None gives its main one."""
        if kind is not None:
            options["kind"] = kind
        return display.render(self, "plot", **options)

    @property
    def provenance(self) -> Provenance | None:
        """Where, when and with what this result was measured (the machine, the runtime and
        its settings, the model file, the inputs): attached by the public verb that made it,
        written into :meth:`to_json` and read back by :meth:`from_json`; None for a result
        made otherwise."""
        found = self.__dict__.get("_provenance")
        return found if isinstance(found, Provenance) else None

    def attach(self, record: Provenance) -> None:
        """Give this result its record (once: a result's record is where it was measured)."""
        if self.provenance is None:
            self.__dict__["_provenance"] = record  # frozen dataclass: its fields stay untouched

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = msgspec.to_builtins(self, enc_hook=_numpy_to_builtin)
        return data

    def headline(self) -> dict[str, object] | None:
        """The figures a person reads first, derived from the data (a decoder's TTFT and
        tokens/s with their intervals): written beside the data in :meth:`to_json` for
        dashboards and scripts, never read back. None: the type has none."""
        return None

    def to_json(self, indent: int | None = None) -> str:

        envelope: dict[str, Any] = {
            "ortlab": type(self).__name__,
            "schema": SCHEMA,
            "ortlab_version": __version__,
        }
        if self.provenance is not None:
            envelope["record"] = msgspec.to_builtins(self.provenance)
        head = self.headline()
        if head is not None:
            envelope["headline"] = head
        envelope["data"] = self.to_dict()
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
            out = msgspec.convert(envelope["data"], type=cls, strict=False)
            if "record" in envelope:
                out.attach(msgspec.convert(envelope["record"], type=Provenance, strict=False))
        except (msgspec.ValidationError, KeyError) as err:
            raise ResultFormatError(f"Malformed {cls.__name__} JSON: {err}") from err
        return out

    def save(self, path: str | Path) -> Path:
        out = Path(path)
        out.write_text(self.to_json())
        return out

    @classmethod
    def load(cls: type[R], path: str | Path) -> R:
        return cls.from_json(Path(path).read_text())
