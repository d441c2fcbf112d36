"""Run a spec here: each item one measurement, written as one record into a folder (the
result's JSON with its record, :mod:`ortlab.core.record`, and the item that made it); an item
that fails is recorded as a failure (what failed, the error) and the rest go on."""

from __future__ import annotations

import datetime as _dt
import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from ortlab.analysis.fleet.spec import Item, Spec
from ortlab.analysis.provenance import recorded, system_facts
from ortlab.core.errors import OrtlabError
from ortlab.core.result import SCHEMA, Result
from ortlab.engine.calls import as_config

if TYPE_CHECKING:
    from ortlab.core.model import Model

__all__ = ["FAILURE", "RunSummary", "failure_record", "item_dict", "run_item", "run_spec"]

FAILURE = "Failure"
"""The ``ortlab`` type of a failed item's record."""


@functools.cache
def _verbs() -> dict[str, Callable[..., Result]]:
    from ortlab.analysis.benchmark import benchmark
    from ortlab.analysis.generation.bench import llm_bench
    from ortlab.analysis.generation.generate import generate
    from ortlab.analysis.limits.cost import cost
    from ortlab.analysis.limits.roofline import roofline
    from ortlab.analysis.memory import footprint
    from ortlab.analysis.placement.measure import placement
    from ortlab.analysis.profiling import profile
    from ortlab.analysis.soak import soak
    from ortlab.analysis.sweep import sweep
    from ortlab.analysis.throughput import throughput

    verbs: list[Callable[..., Result]] = [
        benchmark,
        profile,
        placement,
        cost,
        roofline,
        footprint,
        throughput,
        sweep,
        soak,
        generate,
        llm_bench,
    ]
    return {v.__name__: recorded(v) for v in verbs}


def item_dict(item: Item) -> dict[str, object]:
    """The item as a record names it (the merge's row)."""
    return {
        "key": item.key,
        "model": item.model.label,
        "verb": item.verb,
        "config": item.config_name,
        "args": item.args,
        "dims": item.model.dims,
    }


def _load(item: Item) -> Model:
    from ortlab.core.model import load
    from ortlab.engine import examples

    spec = item.model.model
    if Path(spec).exists():
        return load(spec, part=item.model.part) if item.model.part else load(spec)
    return examples.load(spec)


def run_item(item: Item) -> str:
    """One item measured here: its record's JSON (a failure's, when it fails)."""
    started = time.perf_counter()
    try:
        m = _load(item)
        config = as_config(item.config)
        inputs: dict[str, object] = {}
        if item.model.dims:
            inputs["dims"] = item.model.dims
        if item.model.feeds:
            import numpy as np

            with np.load(item.model.feeds) as z:
                inputs["feeds"] = {k: z[k] for k in z.files}
        result = _verbs()[item.verb](m, config=config, progress=False, **inputs, **item.args)
        envelope = json.loads(result.to_json())
    except (OrtlabError, TypeError, ValueError, OSError) as err:
        return failure_record(item, type(err).__name__, str(err), time.perf_counter() - started)
    envelope["item"] = item_dict(item) | {"seconds": round(time.perf_counter() - started, 2)}
    return json.dumps(envelope, allow_nan=True)


def failure_record(item: Item, kind: str, message: str, seconds: float = 0.0) -> str:
    """A failed item's record: where and when it failed (this machine), the item, the error."""
    envelope = {
        "ortlab": FAILURE,
        "schema": SCHEMA,
        "record": {
            "measured_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "verb": item.verb,
            "system": msgspec.to_builtins(system_facts()),
        },
        "error": {"type": kind, "message": message},
        "item": item_dict(item) | {"seconds": round(seconds, 2)},
    }
    return json.dumps(envelope, allow_nan=True)


@dataclass(frozen=True)
class RunSummary:
    """What a run of a spec did: each item's record file and whether it failed."""

    out: Path
    done: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """Item key -> the error, for the items recorded as failures."""
    seconds: float = 0.0
    retried: list[str] = field(default_factory=list)
    """Items run again on a node that died during them and returned."""

    def text(self) -> str:
        lines = [
            f"{len(self.done)} of {len(self.done) + len(self.failed)} items recorded in "
            f"{self.out} ({self.seconds:.0f} s)"
            + (f"; {len(self.failed)} failed (recorded as failures):" if self.failed else "")
        ]
        lines += [f"  {k}: {v}" for k, v in self.failed.items()]
        lines += [f"run again after its node returned: {k}" for k in self.retried]
        return "\n".join(lines)


def run_spec(
    spec: Spec, out: str | Path, *, say: Callable[[str], None] = lambda _s: None
) -> RunSummary:
    """Every item of ``spec`` measured here in turn, its record written into ``out`` (made
    if missing; a record already there is replaced). ``say``: a line per item as it ends."""
    folder = Path(out).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    done: list[str] = []
    failed: dict[str, str] = {}
    started = time.perf_counter()
    for k, item in enumerate(spec.items, 1):
        text = run_item(item)
        (folder / item.file_name).write_text(text, encoding="utf-8")
        record = json.loads(text)
        if record.get("ortlab") == FAILURE:
            failed[item.key] = f"{record['error']['type']}: {record['error']['message']}"
            said = "FAILED: " + failed[item.key]
        else:
            done.append(item.key)
            said = f"{record['item']['seconds']:.1f} s"
        say(f"[{k}/{len(spec.items)}] {item.key}: {said}")
    return RunSummary(folder, done, failed, time.perf_counter() - started)
