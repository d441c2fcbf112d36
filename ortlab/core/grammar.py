"""The one grammar of what a person types into the CLI and the Lab's boxes: symbolic dims
(``batch=1,sequence=128``, or ``batch=1,2,4; sequence=64,128`` for a sweep), llama-bench's
value lists and ranges (``128,512``, ``1-8+2``, ``128-1024*2``), a list of words, and a pair
of onnxruntime versions (``1.31.1,1.32.0``). Each parser raises an ortlab error that names
the part it could not read and shows the form; the CLI turns it into an argument error."""

from __future__ import annotations

import re
from typing import Literal, overload

from ortlab.core.errors import FeedError, OptionError

__all__ = ["VERSION", "int_list", "parse_dims", "version_pair", "words"]

VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*([._-]?(a|b|rc|dev|post)[0-9]*)*$")
"""An onnxruntime version as PyPI spells it."""
_RANGE = re.compile(r"^(\d+)-(\d+)(?:([+*])(\d+))?$")


def words(text: str) -> list[str]:
    """``"a, b,,c"`` → ``["a", "b", "c"]``: a comma-separated list, blanks dropped."""
    return [w.strip() for w in text.split(",") if w.strip()]


def int_list(text: str, what: str = "") -> list[int]:
    """llama-bench's value lists: ``128,512``; ranges ``1-4`` (step 1), ``1-8+2`` (step 2),
    ``128-1024*2`` (doubling). A part that reads as none is an :class:`OptionError` (its
    message led by ``what``, the box or flag it came from, where given)."""
    lead = f"{what}: " if what else ""
    out: list[int] = []
    for part in words(text) or [text.strip()]:
        if part.isdigit():
            out.append(int(part))
            continue
        m = _RANGE.match(part)
        if not m:
            raise OptionError(
                f"{lead}{part!r}: give counts or ranges, e.g. 128,512 or 1-4 or 1-8+2 or 128-1024*2"
            )
        first, last, op, by = int(m[1]), int(m[2]), m[3] or "+", int(m[4] or 1)
        if last < first or by < (2 if op == "*" else 1) or (op == "*" and first == 0):
            raise OptionError(f"{lead}{part!r}: an empty or endless range")
        k = first
        while k <= last:
            out.append(k)
            k = k + by if op == "+" else k * by
    return out


def version_pair(text: str) -> list[str]:
    """``"1.31.1,1.32.0"`` → the two onnxruntime versions, each as PyPI spells it."""
    versions = words(text)
    if len(versions) != 2 or not all(VERSION.match(v) for v in versions):
        raise OptionError(
            f"give two onnxruntime versions separated by a comma, e.g. 1.31.1,1.32.0 (got {text!r})"
        )
    return versions


@overload
def parse_dims(text: str, many: Literal[False] = False) -> dict[str, int]: ...
@overload
def parse_dims(text: str, many: Literal[True]) -> dict[str, list[int]]: ...


def parse_dims(text: str, many: bool = False) -> dict[str, int] | dict[str, list[int]]:
    """``"batch=1,sequence=128"`` → ``{"batch": 1, "sequence": 128}``; with ``many``,
    ``"batch=1,2,4; sequence=64,128"`` → ``{"batch": [1, 2, 4], "sequence": [64, 128]}``.
    Values are non-negative integers (a past of 0 is a size); a dim left blank (``batch=``,
    as the Lab's box lists the dims to fill) is not given; a part that does not read so is a
    :class:`FeedError` that names it and shows the form. Empty text is no dims."""
    if many:
        out: dict[str, list[int]] = {}
        for part in (p.strip() for p in text.split(";") if p.strip()):
            name, sep, values = part.partition("=")
            parsed = [v.strip() for v in values.split(",") if v.strip()]
            if not sep or not name.strip() or not parsed or not all(v.isdigit() for v in parsed):
                raise FeedError(
                    f"dims: {part!r} is not name=int,int,… (e.g. batch=1,2,4; sequence=64,128)."
                )
            out[name.strip()] = [int(v) for v in parsed]
        return out
    one: dict[str, int] = {}
    for part in (p.strip() for p in text.replace(";", ",").split(",") if p.strip()):
        name, sep, value = part.partition("=")
        if sep and name.strip() and not value.strip():
            continue  # left blank: not given
        if not sep or not name.strip() or not value.strip().isdigit():
            raise FeedError(f"dims: {part!r} is not name=integer (e.g. batch=1,sequence=128).")
        one[name.strip()] = int(value)
    return one
