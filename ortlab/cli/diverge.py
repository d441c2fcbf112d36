"""``ortlab diverge MODEL --against level=disabled`` (or ``--against other.onnx``): where the
model under its session settings and another config or model stop agreeing; ``--repro DIR``
writes the first divergence as a plain-onnxruntime repro."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import ortlab
from ortlab.analysis.diverge import METRICS
from ortlab.cli.args import (
    add_node_data_arg,
    add_session_args,
    load_model,
    verb_args,
    write_node_data,
)
from ortlab.core.model import Model

if TYPE_CHECKING:
    import argparse

__all__ = ["HANDLERS", "add_parsers", "against_arg"]


def against_arg(text: str) -> str | dict[str, object]:
    """A model (a path or a bundled name) or one ``KEY=VALUE`` of a session config: the level,
    providers (comma-separated), threads, spinning…"""
    if "=" not in text:
        return text
    key, _, value = text.partition("=")
    key = key.strip().replace("-", "_")
    if key == "providers":
        return {key: [p for p in value.split(",") if p]}
    if value.lower() in ("true", "false", "on", "off"):
        return {key: value.lower() in ("true", "on")}
    return {key: int(value) if value.lstrip("-").isdigit() else value}


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "diverge", help="where two configs or two models stop agreeing: the first divergent node"
    )
    add_session_args(p)
    p.add_argument(
        "--against",
        type=against_arg,
        action="append",
        required=True,
        metavar="KEY=VALUE|MODEL",
        help="the other side: a config change (level=disabled, providers=openvino,cpu; repeat "
        "for more) or another model (a variant's .onnx)",
    )
    p.add_argument("--metric", choices=list(METRICS), default="cosine")
    p.add_argument("--threshold", type=float, default=None, help="the error a node must add")
    p.add_argument("--repro", help="write the first divergence's repro into this folder")
    add_node_data_arg(p, "output error (SQNR, dB)")


def _diverge(args: argparse.Namespace) -> None:
    m, cfg, feeds, reach = verb_args(args)
    models = [a for a in args.against if isinstance(a, str)]
    changes: dict[str, object] = {}
    for a in args.against:
        if isinstance(a, dict):
            changes.update(a)
    if models and changes:
        raise ortlab.OrtlabError(
            "--against takes config changes or one model, not both: compare the model first, "
            "then its config."
        )
    against: Model | dict[str, object] = load_model(models[0]) if models else changes
    r = ortlab.diverge(
        m, against, cfg, feeds, metric=args.metric, threshold=args.threshold, **reach
    )
    print(r.to_json() if args.json else r.to_text())
    write_node_data(args, m, "error", error=r)
    if args.repro and r.first is None:
        print("no repro written: no divergence reproduces (see the notes above)")
    elif args.repro:
        script = r.save_repro(Path(args.repro))
        print(f"repro written: python {script}  (exits 1 while the divergence reproduces)")


HANDLERS: dict[str, Callable[[argparse.Namespace], None]] = {"diverge": _diverge}
