"""``ortlab llm-bench``: llama-bench's grammar over ``ortlab.llm_bench``.

As llama-bench: ``-m`` (repeatable) names the models; ``-p -n -pg -d -b -ub -t`` take lists,
comma-separated values and ranges (``first-last``, ``first-last+step``, ``first-last*factor``),
or the flag given again (``-n 0 -n 16``); ``-r``, ``-o md|csv|json|jsonl|sql``, ``-oe`` (a
second output on stderr), ``--delay``, ``--no-warmup``, ``--progress``, ``-v``. Its flags
that have no meaning for ONNX Runtime (``-ngl``, ``-fa``, ``-ctk`` …) are refused with exit 2,
naming what ortlab takes instead."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

import ortlab
from ortlab.analysis.generation.bench import LLMBenchResult
from ortlab.analysis.generation.benchrow import DEFAULT_N_BATCH, DEFAULT_N_UBATCH
from ortlab.cli.args import (
    MODEL_HELP,
    add_session_args,
    int_arg,
    load_model,
    session_config,
    wants_progress,
)
from ortlab.core import grammar
from ortlab.core.display import LLAMA_BENCH_FORMATS, render
from ortlab.core.errors import OptionError

__all__ = ["HANDLERS", "UNMAPPED", "add_parsers", "int_list"]


def int_list(text: str) -> list[int]:
    """llama-bench's value lists as an argument (``core.grammar.int_list``)."""
    try:
        return grammar.int_list(text)
    except OptionError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def _pair(text: str) -> list[tuple[int, int]]:
    """``-pg 512,128``: a prompt and the tokens generated after it."""
    parts = grammar.words(text)
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(
            f"{text!r}: -pg takes a prompt length and new tokens, e.g. -pg 512,128"
        )
    return [(int(parts[0]), int(parts[1]))]


UNMAPPED: dict[tuple[str, ...], str] = {
    ("-ngl", "--n-gpu-layers"): "llama.cpp offloads whole layers to a GPU; ONNX Runtime "
    "places each node on an execution provider: pass --providers cuda,cpu (or another EP) "
    "and `ortlab place MODEL` shows where each node runs",
    ("-sm", "--split-mode"): "ONNX Runtime does not split a model over GPUs: pass one EP "
    "with --providers",
    ("-mg", "--main-gpu"): "ONNX Runtime picks its device with the EP's options: pass "
    "--providers cuda (device 0)",
    ("-ts", "--tensor-split"): "ONNX Runtime does not split tensors over GPUs: pass one EP "
    "with --providers",
    ("-rpc", "--rpc"): "ortlab measures on this machine",
    ("-nkvo", "--no-kv-offload"): "the cache lives where the EP that reads it puts it: pass "
    "--providers",
    ("-fa", "--flash-attn"): "an ONNX decoder's attention kernel is the graph's (its "
    "GroupQueryAttention or MultiHeadAttention node); `ortlab place MODEL` names the kernel",
    ("-ctk", "--cache-type-k", "-ctv", "--cache-type-v"): "an ONNX decoder's cache type is "
    "its export's (the past inputs' dtype); export another precision to compare",
    ("-mmp", "--mmap"): "ONNX Runtime maps a model's external data itself",
    ("--numa",): "ONNX Runtime's thread pool has no NUMA policy: run under numactl",
    ("-embd", "--embeddings"): "an ONNX decoder's outputs are its graph's",
    ("-C", "--cpu-mask", "--cpu-strict"): "ortlab sets no affinity: run under taskset",
    ("--prio",): "ortlab runs at the process's priority: run under nice",
    ("--poll",): "ONNX Runtime's intra-op threads spin or sleep: pass --spinning on|off|bounded",
    ("-ot", "--override-tensor", "-dev", "--device", "-nopo", "--no-op-offload"): "ONNX "
    "Runtime places nodes by execution provider: pass --providers",
}
"""llama-bench's flags with no meaning for ONNX Runtime, and what ortlab takes instead."""


class _Refuse(argparse.Action):
    """A llama-bench flag ortlab cannot honour: exit 2 with what to pass instead."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,  # noqa: ARG002 (argparse's Action signature)
        values: str | Sequence[object] | None,  # noqa: ARG002
        option_string: str | None = None,
    ) -> None:
        why = next(w for flags, w in UNMAPPED.items() if option_string in flags)
        parser.error(f"{option_string}: {why}.")


def _parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "llm-bench",
        help="llama-bench's matrix on an ONNX decoder: pp/tg tokens/s over prompt, "
        "new tokens, depth, threads and batch",
        description="llama-bench's tests on ONNX decoders, in its grammar: every list flag "
        "takes comma-separated values and ranges, or is given again (-n 0 -n 16); -p 0 or "
        "-n 0 drops that test. Its flags without an ONNX Runtime meaning ("
        + ", ".join(x for f in UNMAPPED for x in f if len(f) == 1 or not x.startswith("--"))
        + ") exit 2 saying what to pass instead.",
    )
    p.add_argument("model", nargs="*", help=MODEL_HELP)
    p.add_argument(
        "-m",
        "--model",
        dest="models",
        metavar="MODEL",
        action="append",
        default=[],
        help="a model (again for more, as llama-bench's -m)",
    )
    add_session_args(p, model=False, threads=False)
    lists = [
        ("-p", "--n-prompt", "n_prompt", "prompt lengths (default 512)"),
        ("-n", "--n-gen", "n_gen", "tokens to generate (default 128)"),
        ("-d", "--n-depth", "n_depth", "tokens cached before the test (default 0)"),
        ("-t", "--threads", "threads_list", "intra-op thread counts (default: ORT's)"),
        ("-b", "--batch-size", "batch_size", f"logical batch (default {DEFAULT_N_BATCH})"),
        ("-ub", "--ubatch-size", "ubatch_size", f"physical batch (default {DEFAULT_N_UBATCH})"),
        ("--sequences", "--sequences", "sequences", "sequences per step (ortlab's; default 1)"),
    ]
    for short, long, dest, text in lists:
        names = [short] if short == long else [short, long]
        p.add_argument(*names, dest=dest, action="extend", type=int_list, default=None, help=text)
    p.add_argument("-pg", dest="pg", action="extend", type=_pair, default=[], help="pp,tg")
    p.add_argument("-r", "--repetitions", type=int_arg(1), default=5)
    p.add_argument("-o", "--output", choices=LLAMA_BENCH_FORMATS, default="md")
    p.add_argument("-oe", "--output-err", choices=LLAMA_BENCH_FORMATS, default=None)
    p.add_argument("--delay", type=int_arg(0), default=0, help="seconds before each test")
    p.add_argument("--no-warmup", action="store_true", help="time the first repetition too")
    p.add_argument("--progress", action="store_true", help="progress on stderr")
    p.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    p.add_argument("--no-profile", action="store_true", help="skip the per-layer split")
    for flags in UNMAPPED:  # out of the usage line; the description names them
        p.add_argument(*flags, action=_Refuse, nargs="?", help=argparse.SUPPRESS)
    p.set_defaults(threads=0)


def _run(args: argparse.Namespace) -> None:
    specs = [*args.model, *args.models]
    if not specs:
        raise OptionError(
            "llm-bench: name a model, as the first argument or with -m (again for more), e.g. "
            "ortlab llm-bench tiny_llama_int4 -p 64 -n 16"
        )
    shown = args.progress or args.verbose or (wants_progress(args) and args.output == "md")
    results: list[LLMBenchResult] = []
    for spec in specs:
        m = load_model(spec, getattr(args, "part", None))
        results.append(
            ortlab.llm_bench(
                m,
                session_config(args),
                prompt=args.n_prompt or [512],
                new_tokens=args.n_gen or [128],
                depth=args.n_depth or [0],
                threads=args.threads_list,
                n_batch=args.batch_size or [DEFAULT_N_BATCH],
                n_ubatch=args.ubatch_size or [DEFAULT_N_UBATCH],
                pg=args.pg,
                sequences=args.sequences or [1],
                repetitions=args.repetitions,
                warmup=not args.no_warmup,
                delay=float(args.delay),
                profile=not args.no_profile,
                progress=bool(shown),
            )
        )
    if args.json:
        print("\n".join(r.to_json() for r in results))
        return
    first, more = results[0], results[1:]
    print(render(first, args.output, more=more))
    if args.output_err:
        print(render(first, args.output_err, more=more), file=sys.stderr)
    if args.output == "md" and not args.no_profile:
        for r in results:
            print()
            if more:  # several models: say whose split follows
                print(f"{r.model}:")
            print(r.to_text().split("\n\n", 2)[-1])


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _parser(sub)


HANDLERS: dict[str, Callable[[argparse.Namespace], None]] = {"llm-bench": _run}
