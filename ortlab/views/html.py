"""The HTML and terminal-text kit every renderer shares: escaping, tables, the one style,
data inside ``<script>``, path redaction, the inputs line and the load line. Pure functions, no
UI library.

Every string that comes from a model (node, tensor, op, domain and metadata names) goes through
:func:`esc` for HTML and :func:`safe_text` for terminals: it is shown as text, never interpreted
as markup or as terminal control sequences.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

from ortlab.core.cache import cache_dir
from ortlab.core.machine import BUSY_CORES, load_sentence

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_MAX_CELL = 200


def safe_text(value: object, limit: int = _MAX_CELL) -> str:
    """Text for a terminal: control characters (ANSI escapes, bidi overrides) made visible."""
    text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def esc(value: object, limit: int = _MAX_CELL) -> str:
    """HTML-escaped text (quotes included), control characters made visible, length capped."""
    return html.escape(safe_text(value, limit), quote=True)


# ---------------------------------------------------------------- data inside <script>

# In a <script> element the HTML parser ends the element at "</script" and changes state at
# "<!--", whatever JavaScript would make of the text; U+2028/U+2029 end a line in pre-ES2019
# JavaScript. Escaped as \uXXXX these characters mean the same inside JSON strings (the only
# place JSON can hold them), so the value is unchanged and the parser never sees markup.
_SCRIPT_UNSAFE = re.compile("[<>&\u2028\u2029]")


def script_json(value: object) -> str:
    """``value`` as JSON that is inert inside an HTML ``<script>`` element.

    The one way ortlab puts data into a script: every page it writes (graph ``to_html``, the
    report) embeds JSON through this. Non-finite floats become ``null`` so the text is valid
    for ``JSON.parse`` as well as a JavaScript literal."""
    try:
        text = json.dumps(value, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(value), allow_nan=False)
    return _SCRIPT_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _finite(value: object) -> object:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def csp_hash(script: str) -> str:
    """The Content-Security-Policy source (``'sha256-…'``) that allows exactly this inline
    script text (the characters between ``<script…>`` and ``</script>``) and nothing else."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def inline_script(script: str, attrs: str = "") -> str:
    """A ``<script>`` element for trusted code ortlab wrote (model data goes in through
    :func:`script_json` only). Refuses text the HTML parser would not hand to the script
    whole, so its :func:`csp_hash` is the hash the browser computes."""
    if re.search(r"</script|<!--|\r|\x00", script, flags=re.IGNORECASE):
        raise ValueError(
            "Script text contains '</script', '<!--', CR or NUL: the HTML parser would split "
            "or rewrite it and its CSP hash would not match. Embed data with script_json()."
        )
    return f"<script{attrs}>{script}</script>"


def private_path_patterns() -> list[str]:
    """Folders a shared page must not reveal: ortlab's cache and the user's home directory
    (longest first, so the cache inside the home is named as the cache)."""
    folders = {str(cache_dir()), str(Path.home())}
    return sorted((f for f in folders if f not in ("", "/")), key=len, reverse=True)


def inputs_html(what: str, shapes: str | None, synthetic: bool | None) -> str:
    """One line next to a timing or accuracy figure: whether its inputs were synthetic and the
    shapes it was measured at (``None``: the result does not record it, and the line says so)."""
    kind = {
        True: "synthetic inputs (seeded random values, not your data)",
        False: "inputs you gave",
        None: "inputs (synthetic or given: not recorded in this result)",
    }[synthetic]
    where = f"shapes {esc(shapes, 1000)}" if shapes else "shapes not recorded in this result"
    cls = "ortlab-inputs ortlab-warn" if synthetic else "ortlab-inputs"
    return f'<div class="{cls}">{esc(what)}: measured on {kind} · {where}</div>'


def load_html(other: float | None) -> str:
    """The load sentence (``core.machine.load_sentence``), in the warning colour when busy."""
    cls = ' class="ortlab-warn"' if other is not None and other > BUSY_CORES else ""
    return f"<div{cls}>{esc(load_sentence(other))}</div>"


def redact_paths(text: str) -> str:
    """``text`` (plain or HTML-escaped) with ortlab's cache folder shown as ``[ortlab cache]``
    and the home directory as ``~``: a report travels to other people and machines."""
    cache = str(cache_dir())
    for folder in private_path_patterns():
        label = "[ortlab cache]" if folder == cache else "~"  # no markup, no regex escapes
        text = re.sub(re.escape(folder) + r"(?=[/\\\s'\"),;:<&]|$)", label, text)
    return text


# ---------------------------------------------------------------- generic tables

STYLE = (
    "<style>.ortlab-t{border-collapse:collapse;font-size:12px;margin:4px 0}"
    ".ortlab-t th,.ortlab-t td{padding:2px 8px;text-align:left;border-bottom:1px solid #ddd}"
    ".ortlab-t td.n{text-align:right;font-variant-numeric:tabular-nums}"
    # a name or word wider than its column breaks where it must: a table never widens its box
    ".ortlab-t td:not(.n){overflow-wrap:anywhere}"
    ".ortlab-warn{color:#a40;font-weight:600}</style>"
)


def table_html(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    decimals = column_decimals(headers, rows)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{esc(_num(c, d))}</td>' if _is_num(c) else f"<td>{breakable(c)}</td>"
            for c, d in zip(row, decimals, strict=False)
        )
        + "</tr>"
        for row in rows
    )
    return f'<table class="ortlab-t"><tr>{head}</tr>{body}</table>'


_LONG_TOKEN = re.compile(r"[^\s<>&]{24,}")


def breakable(value: object) -> str:
    """``value`` escaped, with a line-break opportunity (``<wbr>``) after each ``_ . / : ,``
    inside tokens of 24 characters or more: a node name such as
    ``/model.22/cv3.2/cv3.2.0/conv/Conv_output_0_nchwc`` wraps at its own separators instead
    of widening its table past the page (and short words are never split)."""
    text = esc(value)
    return _LONG_TOKEN.sub(lambda m: re.sub(r"([_./:,])", r"\1<wbr>", m.group(0)), text)


def table_text(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    decimals = column_decimals(headers, rows)
    cells = [[safe_text(h) for h in headers]] + [
        [
            safe_text(_num(c, d)) if _is_num(c) else safe_text(c, 60)
            for c, d in zip(row, decimals, strict=False)
        ]
        for row in rows
    ]
    numeric = [[False] * len(headers)] + [[_is_num(c) or _is_pct(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for row, nums in zip(cells, numeric, strict=True):
        lines.append(
            "  ".join(
                c.rjust(w) if num else c.ljust(w)
                for c, w, num in zip(row, widths, nums, strict=True)
            ).rstrip()
        )
        if len(lines) == 1:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _is_num(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _is_pct(v: object) -> bool:
    """Percentages we format ourselves ("12.5%") align like numbers."""
    return isinstance(v, str) and bool(re.fullmatch(r"-?\d+(\.\d+)?%", v))


def column_decimals(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[int]:
    """One format per column, so one unit reads alike down a table (never ``17,701.0`` above
    ``54.000``): microseconds whole (ORT's profiler counts whole µs), else the decimals the
    column's largest value needs for about four significant digits (at most 3)."""
    out = []
    for i, h in enumerate(headers):
        cells = [r[i] for r in rows if i < len(r)]
        floats = [abs(v) for v in cells if isinstance(v, float) and math.isfinite(v)]
        if "µs" in h:
            out.append(0)
        elif not floats:
            out.append(3)
        else:
            top = max(floats)
            out.append(1 if top >= 100 else 2 if top >= 1 else 3)
    return out


def _num(v: object, decimals: int = 3) -> str:
    if isinstance(v, int):
        return f"{v:,}"
    if not isinstance(v, float):
        return safe_text(v)
    if math.isnan(v):
        return "nan"
    return f"{v:,.{decimals}f}"
