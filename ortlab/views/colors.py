"""The colours of execution providers and op types, in one home: the plotly figures read them
here and the graph view's canvas and legend receive them with the graph (``pack`` puts
:func:`palette` in the wire form), so an EP has one colour in every chart and on the graph. An
EP without a fixed colour gets one from its name by the same hash in Python and in JS."""

from __future__ import annotations

__all__ = [
    "CATEGORICAL",
    "PROVIDER_COLORS",
    "VERDICT_COLORS",
    "hash_color",
    "palette",
    "provider_color",
    "verdict_color",
]

PROVIDER_COLORS = {
    "CPUExecutionProvider": "#4C78A8",
    "CUDAExecutionProvider": "#54A24B",
    "TensorrtExecutionProvider": "#76B7B2",
    "OpenVINOExecutionProvider": "#F58518",
    "DmlExecutionProvider": "#B279A2",
    "CoreMLExecutionProvider": "#9D755D",
    "QNNExecutionProvider": "#E45756",
}
CATEGORICAL = [
    "#4C78A8",
    "#F58518",
    "#54A24B",
    "#E45756",
    "#72B7B2",
    "#EECA3B",
    "#B279A2",
    "#FF9DA6",
    "#9D755D",
    "#BAB0AC",
]
"""Colours by name for what has no fixed one (other EPs, op types)."""
VERDICT_COLORS = {"faster": "#2166AC", "slower": "#B2182B", "neither": "#BAB0AC"}
"""A comparison's verdict, the same in every chart and on the graph: blue faster, red slower,
grey for no measurable difference, within noise or no verdict."""


def verdict_color(verdict: str) -> str:
    """The colour of a verdict word or sentence ('faster', 'x is 1.3x slower than y: …'); a
    sentence that says the gain may be noise ('perhaps by no more than') is grey."""
    text = verdict.lower()
    if "perhaps" in text or "no measurable" in text:
        return VERDICT_COLORS["neither"]
    for word in ("faster", "slower"):
        if word in text:
            return VERDICT_COLORS[word]
    return VERDICT_COLORS["neither"]


def hash_color(text: str) -> str:
    """``CATEGORICAL`` by a hash of ``text``: h = h * 31 + the first UTF-16 unit of each code
    point, modulo 2**32 (overlays.js ``hashColor`` computes the same)."""
    h = 0
    for ch in text:
        cp = ord(ch)
        unit = cp if cp <= 0xFFFF else 0xD800 + ((cp - 0x10000) >> 10)  # the high surrogate
        h = (h * 31 + unit) & 0xFFFFFFFF
    return CATEGORICAL[h % len(CATEGORICAL)]


def provider_color(provider: str) -> str:
    """An EP's colour: its fixed one, else one from its name."""
    return PROVIDER_COLORS.get(provider) or hash_color(provider)


def palette() -> dict[str, object]:
    """What the graph view's JS colours with: ``{"providers": …, "categorical": …,
    "verdicts": …}``."""
    return {
        "providers": dict(PROVIDER_COLORS),
        "categorical": list(CATEGORICAL),
        "verdicts": dict(VERDICT_COLORS),
    }
