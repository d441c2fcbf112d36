"""Reading the graph view's wire form (``pack(graph)``) in tests: the page's state
block, and the front-coded string table (prefix lengths in UTF-16 units, as JavaScript counts
them). The browser's own decoder is graph/data.js ``unpack``; tests/ui checks it restores
``GraphData.to_dict()``."""

from __future__ import annotations

import json
import re
from typing import Any

from ortlab.views.graph.page import STATE_ID


def page_state(html: str) -> dict[str, Any]:
    """The state block of a graph page or report (the packed graph under ``data``)."""
    found = re.search(
        f'<script type="application/json" id="{STATE_ID}">(.*?)</script>', html, flags=re.S
    )
    assert found, "the page has the graph's state block"
    state: dict[str, Any] = json.loads(found.group(1))
    return state


def strings(packed: dict[str, Any]) -> list[str]:
    out: list[str] = []
    prev = b""
    for k, rest in zip(packed["strings"]["prefix"], packed["strings"]["suffix"], strict=True):
        prev = prev[: 2 * k] + rest.encode("utf-16-le", "surrogatepass")
        out.append(prev.decode("utf-16-le", "surrogatepass"))
    return out


def node_strings(packed: dict[str, Any], i: int) -> dict[str, Any]:
    """Node ``i``'s name, op type, domain, inputs, outputs and attributes from the columns."""
    s, c = strings(packed), packed["nodes"]
    flat = [s[x] for x in c["attrs"][i]] if c["attrs"] else []
    return {
        "name": s[c["name"][i]],
        "op_type": s[c["op_type"][i]],
        "domain": s[c["domain"][i]] if c["domain"] else "",
        "inputs": [s[t] for t in c["inputs"][i]],
        "outputs": [s[t] for t in c["outputs"][i]],
        "attrs": dict(zip(flat[::2], flat[1::2], strict=True)),
    }
