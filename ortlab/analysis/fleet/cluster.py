"""A spec run on every node of a Ray cluster (``ortlab run SPEC -o DIR --ray ADDRESS``): one
measuring actor per node, pinned to it and named for it, that runs one item at a time (any
caller's: the name is the node's, so two runs never measure on one node at once); each
node's records gathered into ``DIR/<node>/``; an item whose node died is run again on that
node when it returns (a node is known by its ``ortlab-node-NAME`` resource, else its id) or
recorded as a failure that says so. Ray is the optional extra ``pip install ortlab[fleet]``."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ortlab.analysis.fleet.runner import FAILURE, RunSummary, failure_record, run_item
from ortlab.analysis.fleet.spec import Item, Spec
from ortlab.core.errors import OptionError

if TYPE_CHECKING:
    from ray.actor import ActorHandle
    from ray.types import ObjectRef

__all__ = ["NODE_RESOURCE", "run_on_ray"]

NODE_RESOURCE = "ortlab-node-"
"""A node started with ``--resources '{"ortlab-node-NAME": 1}'`` is ``NAME`` in records (and
is known again when it restarts); any other node is ``node-<its id's first 8>``."""
NAMESPACE = "ortlab"


def _need_ray() -> None:
    try:
        import ray  # noqa: F401
    except ImportError as err:
        raise OptionError(
            "--ray needs Ray: pip install 'ortlab[fleet]' (the local run needs nothing more)"
        ) from err


class _Measurer:
    """The node's measuring actor: its environment names the node in every record."""

    def __init__(self, node: str) -> None:
        os.environ["ORTLAB_NODE"] = node

    def run(self, item: Item) -> str:
        return run_item(item)


@dataclass
class _Node:
    name: str
    node_id: str
    items: list[Item]
    done: int = 0
    retried: list[str] = field(default_factory=list)
    actor: ActorHandle | None = None
    running: ObjectRef | None = None


def _name(node: dict[str, object]) -> str:
    resources = node.get("Resources") or {}
    assert isinstance(resources, dict)
    named = [k[len(NODE_RESOURCE) :] for k in resources if k.startswith(NODE_RESOURCE)]
    return named[0] if named else f"node-{str(node['NodeID'])[:8]}"


def _alive(label: str | None) -> dict[str, str]:
    """Alive nodes by name (those whose name or resources match ``label``) -> their id."""
    import ray

    nodes = ray.nodes()
    return {
        _name(n): str(n["NodeID"])
        for n in nodes
        if n.get("Alive") and (label is None or label == _name(n) or label in n["Resources"])
    }


@dataclass
class _Run:
    """One spec on the nodes: each node's items in turn, its records in ``folder/<node>``."""

    nodes: list[_Node]
    folder: Path
    measurer: Any
    rejoin_s: float
    say: Callable[[str], None]
    done: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    def start(self, n: _Node) -> None:
        """``n``'s next item, on its actor (made on its node the first time)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if n.actor is None:
            n.actor = self.measurer.options(
                name=f"ortlab-measure-{n.name}",
                get_if_exists=True,
                scheduling_strategy=NodeAffinitySchedulingStrategy(n.node_id, soft=False),
            ).remote(n.name)
        n.running = n.actor.run.remote(n.items[n.done]) if n.done < len(n.items) else None

    def finish(self, n: _Node, text: str) -> None:
        """``n``'s item ended: its record written, said; the next one is ``n``'s to start."""
        item = n.items[n.done]
        (self.folder / n.name).mkdir(parents=True, exist_ok=True)
        (self.folder / n.name / item.file_name).write_text(text, encoding="utf-8")
        doc = json.loads(text)
        key = f"{item.label} on {n.name}"
        if doc.get("ortlab") == FAILURE:
            self.failed[key] = f"{doc['error']['type']}: {doc['error']['message']}"
        else:
            self.done.append(key)
        n.done += 1
        self.say(f"[{n.name}] {n.done}/{len(n.items)} {item.label}: {self.failed.get(key, 'done')}")

    def lost(self, n: _Node) -> None:
        """``n`` died mid-item: its item again when it returns, else the rest as failures."""
        item = n.items[n.done]
        self.say(f"[{n.name}] the node died during {item.label}; waiting {self.rejoin_s:.0f} s")
        deadline = time.monotonic() + self.rejoin_s
        while time.monotonic() < deadline:
            back = _alive(None).get(n.name)
            if back is not None and back != n.node_id:
                n.node_id, n.actor = back, None
                n.retried.append(item.label)
                self.say(f"[{n.name}] back: {item.label} runs again there")
                self.start(n)
                return
            time.sleep(1.0)
        why = (
            f"the node {n.name} died during {item.label} and did not return within "
            f"{self.rejoin_s:.0f} s"
        )
        for k, rest in enumerate(n.items[n.done :]):
            self.finish(
                n, failure_record(rest, "NodeDiedError", why if k == 0 else f"not run: {why}")
            )
        n.running = None

    def loop(self) -> None:
        import ray

        for n in self.nodes:
            self.start(n)
        while any(n.running is not None for n in self.nodes):
            refs = [n.running for n in self.nodes if n.running is not None]
            ready, _ = ray.wait(refs, num_returns=1)
            n = next(x for x in self.nodes if x.running is not None and x.running == ready[0])
            try:
                text = ray.get(ready[0])
            except Exception:  # noqa: BLE001 - Ray's actor, node and worker deaths alike
                self.lost(n)
                continue
            self.finish(n, text)
            self.start(n)


def run_on_ray(
    spec: Spec,
    out: str | Path,
    address: str,
    *,
    label: str | None = None,
    rejoin_s: float = 120.0,
    say: Callable[[str], None] = lambda _s: None,
) -> RunSummary:
    """Every item of ``spec`` on every node of the cluster at ``address`` (or the nodes whose
    name or resources match ``label``), each node one item at a time, records in
    ``out/<node>/``. A node that dies mid-item: the item runs again there when the node
    returns within ``rejoin_s`` seconds, else it and the node's remaining items are
    recorded as failures saying so."""
    _need_ray()
    import ray

    if not ray.is_initialized():
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False)
    found = _alive(label)
    if not found:
        which = f" matches {label!r}" if label else ""
        raise OptionError(f"--ray {address}: no alive node{which}")
    nodes = [_Node(name, node_id, list(spec.items)) for name, node_id in sorted(found.items())]
    names = ", ".join(n.name for n in nodes)
    say(f"{len(spec.items)} items on each of {len(nodes)} nodes: {names}")
    started = time.perf_counter()
    measurer = ray.remote(num_cpus=0, max_concurrency=1, max_restarts=0)(_Measurer)
    run = _Run(nodes, Path(out).expanduser(), measurer, rejoin_s, say)
    run.loop()
    retried = [f"{i} on {n.name}" for n in nodes for i in n.retried]
    return RunSummary(run.folder, run.done, run.failed, time.perf_counter() - started, retried)
