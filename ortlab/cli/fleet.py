"""``ortlab run SPEC -o DIR`` (a spec's items measured here, one record each; ``--example``
prints a worked spec) and ``ortlab merge DIR...`` (their records as one comparison; ``--fail-on``
makes it a CI gate: exit 1 when a cell is beyond it)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from ortlab.analysis.fleet.merge import COLUMNS_BY, merge
from ortlab.analysis.fleet.runner import run_spec
from ortlab.analysis.fleet.spec import EXAMPLE, read_spec
from ortlab.core.display import render
from ortlab.core.errors import OptionError
from ortlab.core.grammar import words
from ortlab.engine import examples

__all__ = ["HANDLERS", "add_parsers"]


def _run(args: argparse.Namespace) -> int | None:
    if args.example and not args.out:
        print(EXAMPLE, end="")
        return None
    if args.example:  # the example run as printed: written beside its records, then read
        Path(args.out).mkdir(parents=True, exist_ok=True)
        args.spec = str(Path(args.out) / "spec.toml")
        Path(args.spec).write_text(EXAMPLE, encoding="utf-8")
    if not args.spec or not args.out:
        raise OptionError(
            "run: give a spec and a folder for the records: ortlab run spec.toml -o records/ "
            "(ortlab run --example > spec.toml writes a worked one)"
        )
    spec = read_spec(args.spec, examples=set(examples.names()))
    if args.onnxruntime:
        spec = spec.under(words(args.onnxruntime))
    print(f"{len(spec.items)} items from {args.spec} into {args.out}", file=sys.stderr)
    say = lambda line: print(line, file=sys.stderr)  # noqa: E731
    if args.ray:
        from ortlab.analysis.fleet.cluster import run_on_ray

        summary = run_on_ray(
            spec, args.out, args.ray, label=args.ray_label, rejoin_s=args.rejoin, say=say
        )
    else:
        summary = run_spec(spec, args.out, say=say)
    print(summary.text())
    return 1 if summary.failed and args.strict else None


def _merge(args: argparse.Namespace) -> int | None:
    r = merge(args.folders, by=args.by, baseline=args.baseline, fail_on=args.fail_on or "")
    if args.json:
        print(r.to_json())
    else:
        print(r.to_text())
    if args.html:
        body = render(r, "html")
        page = f"<!doctype html><meta charset='utf-8'><title>ortlab merge</title>{body}"
        Path(args.html).write_text(page, encoding="utf-8")
    return 1 if r.failures() else None


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="measure a spec's items (models x verbs x configs) here, one record each",
        description="Every (model, verb, config) of the spec measured here in turn, one JSON "
        "record per item in the folder (the result with where it was measured); a failed item "
        "is recorded as a failure and the rest go on.",
    )
    p.add_argument("spec", nargs="?", help="a .toml (or .json) spec")
    p.add_argument("-o", "--out", help="the folder for the records (made if missing)")
    p.add_argument(
        "--example",
        action="store_true",
        help="print a worked spec (with -o: write it there as spec.toml and run it)",
    )
    p.add_argument("--strict", action="store_true", help="exit 1 when an item failed")
    p.add_argument(
        "--onnxruntime",
        metavar="VERSIONS",
        help="e.g. 1.31.1,1.32.0: each item runs under each version, one after the other, each "
        "in its own virtual environment built once from PyPI ('here': this one); replaces the "
        "spec's onnxruntime list. Then: ortlab merge OUT --by onnxruntime",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run on every node of this Ray cluster (pip install 'ortlab[fleet]'), records "
        "in OUT/<node>/; name nodes with --resources '{\"ortlab-node-NAME\": 1}'",
    )
    p.add_argument("--ray-label", default=None, help="only the nodes of this name or resource")
    p.add_argument(
        "--rejoin",
        type=float,
        default=120.0,
        help="seconds to wait for a node that died mid-item before recording its items as failed",
    )
    p = sub.add_parser(
        "merge",
        help="the records of many runs as one comparison (machines or onnxruntime versions)",
        description="Rows: the spec's items; columns: the machines (or onnxruntime versions) "
        "that ran them; each cell the figure with its interval and a verdict against the "
        "baseline column. --fail-on 'p50 > 1.10x baseline' exits 1 when a cell is beyond it "
        "with its whole interval.",
    )
    p.add_argument("folders", nargs="+", help="folders of records (ortlab run -o)")
    p.add_argument("--by", choices=COLUMNS_BY, default="machine")
    p.add_argument("--baseline", default=None, help="the column to compare with (default: first)")
    p.add_argument("--fail-on", default=None, help="e.g. 'p50 > 1.10x baseline'")
    p.add_argument("--html", default=None, metavar="FILE", help="also write the table as HTML")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


HANDLERS: dict[str, Callable[[argparse.Namespace], int | None]] = {"run": _run, "merge": _merge}
