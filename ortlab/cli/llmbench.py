"""``ortlab llm-bench``: llama-bench's grammar (``-p 128,512 -n 64 -d 0,512 -t 1,2 -b 1 -r 5
-o md|csv|json|jsonl``; a list is comma-separated values and ranges ``first-last+step`` or
``first-last*factor``) over ``ortlab.llm_bench``."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import ortlab
from ortlab.cli.args import add_session_args, int_arg, load_model, session_config, wants_progress

if TYPE_CHECKING:
    import argparse

__all__ = ["HANDLERS", "add_parsers", "int_list"]

_RANGE = re.compile(r"^(\d+)-(\d+)(?:([+*])(\d+))?$")


def int_list(text: str) -> list[int]:
    """llama-bench's value lists: '128,512', '1-4' (step 1), '1-8+2', '128-1024*2'."""
    out: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if part.isdigit():
            out.append(int(part))
            continue
        m = _RANGE.match(part)
        if not m:
            raise argparse.ArgumentTypeError(
                f"{part!r}: give counts or ranges, e.g. 128,512 or 1-4 or 1-8+2 or 128-1024*2"
            )
        first, last, op, by = int(m[1]), int(m[2]), m[3] or "+", int(m[4] or 1)
        if last < first or by < (2 if op == "*" else 1) or (op == "*" and first == 0):
            raise argparse.ArgumentTypeError(f"{part!r}: an empty or endless range")
        k = first
        while k <= last:
            out.append(k)
            k = k + by if op == "+" else k * by
    return out


def _parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "llm-bench",
        help="llama-bench's matrix on an ONNX decoder: pp/tg tokens/s over prompt, "
        "new tokens, depth, threads and batch",
    )
    add_session_args(p)
    p.add_argument("-p", "--n-prompt", type=int_list, default=[512], help="prompt lengths")
    p.add_argument("-n", "--n-gen", type=int_list, default=[128], help="tokens to generate")
    p.add_argument("-d", "--n-depth", type=int_list, default=[0], help="tokens cached first")
    p.add_argument(
        "-t", "--threads-list", type=int_list, default=None, help="intra-op thread counts"
    )
    p.add_argument("-b", "--batch-size", type=int_list, default=[1], help="sequences per run")
    p.add_argument("-r", "--repetitions", type=int_arg(1), default=5)
    p.add_argument("-o", "--output", choices=["md", "csv", "json", "jsonl"], default="md")
    p.add_argument("--no-profile", action="store_true", help="skip the per-layer split")


def _run(args: argparse.Namespace) -> None:
    m = load_model(args.model, getattr(args, "part", None))
    r = ortlab.llm_bench(
        m,
        session_config(args),
        prompt=args.n_prompt,
        new_tokens=args.n_gen,
        depth=args.n_depth,
        threads=args.threads_list,
        batch=args.batch_size,
        repetitions=args.repetitions,
        profile=not args.no_profile,
        progress=wants_progress(args) and args.output == "md",
    )
    if args.json:
        print(r.to_json())
        return
    print(r.to_llama_bench(args.output))
    if args.output == "md" and not args.no_profile:
        print()
        print(r.to_text().split("\n\n", 2)[-1])


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _parser(sub)


HANDLERS: dict[str, Callable[[argparse.Namespace], None]] = {"llm-bench": _run}
