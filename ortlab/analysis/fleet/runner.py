"""Run a spec here: each item one measurement, written as one record into a folder (the
result's JSON with its record, :mod:`ortlab.core.record`, and the item that made it); an item
that fails is recorded as a failure (what failed, the error) and the rest go on."""

from __future__ import annotations

import atexit
import contextlib
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
from ortlab.analysis.provenance import recorded, runtime_version, system_facts
from ortlab.core.errors import OrtlabError
from ortlab.core.result import SCHEMA, Result
from ortlab.engine.calls import as_config
from ortlab.engine.venvs import start_worker
from ortlab.engine.worker import Worker, using

if TYPE_CHECKING:
    from ortlab.core.model import Model

__all__ = [
    "FAILURE",
    "RunSummary",
    "failure_record",
    "item_dict",
    "release_workers",
    "run_item",
    "run_spec",
]

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
        "onnxruntime": item.onnxruntime or "here",
    }


_WORKERS: dict[str, Worker] = {}
"""The workers of the onnxruntime versions this process's items ran under, by version."""


def _version_worker(version: str) -> Worker:
    """The worker of ``version``'s environment (built once), kept for this process's next
    items until :func:`release_workers` (or the process's end) stops it."""
    if version not in _WORKERS or not _WORKERS[version].alive():
        _WORKERS[version] = start_worker(version)
    return _WORKERS[version]


def release_workers() -> None:
    """Stop the other onnxruntime versions' workers (a run of a spec ends with it)."""
    while _WORKERS:
        _WORKERS.popitem()[1].stop()


atexit.register(release_workers)


def _serving(item: Item) -> contextlib.AbstractContextManager[None]:
    """Where ``item`` runs: its onnxruntime version's worker, else this process's own."""
    if not item.onnxruntime:
        return contextlib.nullcontext()
    return using(_version_worker(item.onnxruntime))


def _load(item: Item) -> Model:
    from ortlab.core.model import load
    from ortlab.engine import examples

    spec = item.model.model
    if Path(spec).exists():
        return load(spec, part=item.model.part) if item.model.part else load(spec)
    return examples.load(spec)


def run_item(item: Item) -> str:
    """One item measured here (under its onnxruntime version's worker where it names one):
    its record's JSON (a failure's, when it fails)."""
    started = time.perf_counter()
    try:
        with _serving(item):
            envelope = _measured(item)
    except (OrtlabError, TypeError, ValueError, OSError) as err:
        return failure_record(item, type(err).__name__, str(err), time.perf_counter() - started)
    envelope["item"] = item_dict(item) | {"seconds": round(time.perf_counter() - started, 2)}
    return json.dumps(envelope, allow_nan=True)


def _measured(item: Item) -> dict[str, object]:
    m = _load(item)
    inputs: dict[str, object] = {}
    if item.model.dims:
        inputs["dims"] = item.model.dims
    if item.model.feeds:
        import numpy as np

        with np.load(item.model.feeds) as z:
            inputs["feeds"] = {k: z[k] for k in z.files}
    verb = _verbs()[item.verb]
    result = verb(m, config=as_config(item.config), progress=False, **inputs, **item.args)
    envelope: dict[str, object] = json.loads(result.to_json())
    return envelope


def failure_record(item: Item, kind: str, message: str, seconds: float = 0.0) -> str:
    """A failed item's record: where and when it failed (this machine), the item, the error."""
    envelope = {
        "ortlab": FAILURE,
        "schema": SCHEMA,
        "record": {
            "measured_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "verb": item.verb,
            "system": msgspec.to_builtins(system_facts()),
            "runtime": {"version": item.onnxruntime or runtime_version()},
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
    try:
        for k, item in enumerate(spec.items, 1):
            text = run_item(item)
            (folder / item.file_name).write_text(text, encoding="utf-8")
            record = json.loads(text)
            if record.get("ortlab") == FAILURE:
                failed[item.label] = f"{record['error']['type']}: {record['error']['message']}"
                said = "FAILED: " + failed[item.label]
            else:
                done.append(item.label)
                said = f"{record['item']['seconds']:.1f} s"
            say(f"[{k}/{len(spec.items)}] {item.label}: {said}")
    finally:
        release_workers()  # the other versions' workers end with the run
    return RunSummary(folder, done, failed, time.perf_counter() - started)
