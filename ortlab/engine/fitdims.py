"""Guessed dims that fit (issue 47 item 2): a dim is guessed from how the graph uses it, and
the shapes a guess implies are known to fit this machine's memory before anything runs.

- **Usage.** ORT's symbolic shape inference (auto-merge) unifies two symbols where the graph
  broadcasts one against the other: a diffusion UNet's timestep vector ``[steps]`` added to
  ``[batch, C, H, W]`` makes ``steps`` the batch. A guessed dim unified with a batch-like one is
  batch-like, whatever its name says (it said a sequence: 128, which made ORT ask its arena for
  10 TB).
- **Fit.** At the guessed values the same inference gives every tensor's shape; its bytes say
  the least a run needs (:class:`ortlab.core.dimfit.Footprint`). A guess whose run could not fit
  :data:`FREE_SHARE` of the memory free now is shrunk (every largest guess halved, step by
  step), the reason saying what it would have needed, or refused naming the dims and what to
  pass — never ORT's raw allocation error. Given dims are never changed.

Both read the graph in the worker (``tasks_dims``): onnxruntime's inference is not imported in
the user's process."""

from __future__ import annotations

from ortlab.core.errors import FeedError
from ortlab.core.inputs import DimChoice
from ortlab.core.model import Model
from ortlab.core.units import fmt_bytes
from ortlab.engine import tasks_dims
from ortlab.engine.replies import DimFacts
from ortlab.engine.worker import get_worker, task_name

__all__ = ["FREE_SHARE", "fit_guesses"]

FREE_SHARE = 0.8
"""The share of the memory free now a guessed run may need (the rest: ORT's arena slack, the
session, the caller)."""
SHRINK_STEPS = 16
_BATCHLIKE = ("guessed: batch", "default for batch-like")


def fit_guesses(
    model: Model, choices: dict[str, DimChoice], free: int | None = None
) -> dict[str, DimChoice]:
    """``choices`` with their guesses read from the graph's use of each dim, then shrunk to fit
    the memory (``free`` bytes; default: what is free now); refused when nothing fits."""
    import psutil

    guessed = [n for n, c in choices.items() if c.why != "given"]
    if not guessed:
        return choices
    free = psutil.virtual_memory().available if free is None else free
    room = int(free * FREE_SHARE)
    facts = _facts(
        model,
        model_path=str(model.path),
        candidates=[{n: c.value for n, c in choices.items()}],
        room=room,
        merges=True,
    )
    choices = _by_usage(choices, facts.merges)
    values = {n: c.value for n, c in choices.items()}
    steps = _shrunk(values, guessed)
    first = facts.footprints[0] if facts.footprints else None
    if facts.merges or (first is not None and first.peak_bytes > room):
        # the guesses changed (the first footprint is theirs), or they need shrinking
        facts = _facts(
            model,
            model_path=str(model.path),
            candidates=[values, *steps],
            room=room,
            merges=False,
        )
    prints = facts.footprints
    first = prints[0] if prints else None
    if first is None or first.peak_bytes <= room:
        return choices
    last = prints[-1]
    if last is None or last.peak_bytes > room:
        at = steps[len(prints) - 2] if len(prints) > 1 else values
        shown = ", ".join(f"{n!r}: {at[n]}" for n in guessed)
        asked = ", ".join(f"{n}={choices[n].value}" for n in guessed)
        need = last.peak_bytes if last is not None else first.peak_bytes
        raise FeedError(
            f"At the dims ortlab guessed for {model.name!r} ({asked}) a run needs at least "
            f"{fmt_bytes(first.peak_bytes)} ({first.largest!r} alone "
            f"{fmt_bytes(first.largest_bytes)}), more than the {fmt_bytes(free)} free; even at "
            f"{{{shown}}} it needs {fmt_bytes(need)}. Pass the model's real sizes: "
            f"dims={{{shown}}} or smaller, or feeds=."
        )
    fitted = steps[len(prints) - 2]
    out = dict(choices)
    for n in guessed:
        if fitted[n] != choices[n].value:
            out[n] = DimChoice(
                n,
                fitted[n],
                f"{choices[n].why}; shrunk from {choices[n].value}: at the guessed dims a run "
                f"needs at least {fmt_bytes(first.peak_bytes)} ({first.largest!r} alone "
                f"{fmt_bytes(first.largest_bytes)}), more than {FREE_SHARE:.0%} of the "
                f"{fmt_bytes(free)} free",
            )
    return out


def _facts(
    model: Model,
    *,
    model_path: str,
    candidates: list[dict[str, int]],
    room: int,
    merges: bool,
) -> DimFacts:
    """``tasks_dims.dim_facts`` in the worker (no progress: a few inferences)."""
    kwargs = {"model_path": model_path, "candidates": candidates, "room": room, "merges": merges}
    got: DimFacts = get_worker().call(
        task_name(tasks_dims.dim_facts),
        kwargs,
        timeout=None,
        context=f"reading {model.name!r}'s dims",
    )
    return got


def _by_usage(choices: dict[str, DimChoice], merges: dict[str, str]) -> dict[str, DimChoice]:
    """Each guessed dim the graph unifies with a batch-like one made batch-like too."""
    out = dict(choices)
    for a, b in merges.items():
        for this, other in ((a, b), (b, a)):
            mine, theirs = out.get(this), out.get(other)
            if mine is None or theirs is None or mine.why == "given":
                continue
            batch_like = theirs.why.startswith(_BATCHLIKE) or (
                theirs.why == "given" and theirs.value == 1
            )
            if batch_like and not mine.why.startswith(_BATCHLIKE) and mine.value != theirs.value:
                out[this] = DimChoice(
                    this,
                    theirs.value,
                    f"guessed: batch-like, as the graph broadcasts it against {other!r} "
                    f"(its name suggested {mine.value}: {mine.why})",
                )
    return out


def _shrunk(values: dict[str, int], guessed: list[str]) -> list[dict[str, int]]:
    """The candidates after ``values``: each step halves every largest guess (an image's two
    sides alike), until none is above 1 or :data:`SHRINK_STEPS`."""
    out = []
    now = dict(values)
    for _ in range(SHRINK_STEPS):
        can = [n for n in guessed if now[n] > 1]
        if not can:
            break
        top = max(now[n] for n in can)
        now = {n: (max(1, v // 2) if n in can and v == top else v) for n, v in now.items()}
        out.append(dict(now))
    return out
