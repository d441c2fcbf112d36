"""The one grammar of symbolic dims as a person types them, in the CLI, the Lab's dims box and
the Limits tab's sweep box: ``batch=1,sequence=128`` (one value per dim) or
``batch=1,2,4; sequence=64,128`` (several values per dim, for a sweep)."""

from __future__ import annotations

from typing import Literal, overload

from ortlab.core.errors import FeedError

__all__ = ["parse_dims"]


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
