"""The command line's "why is it slow" verbs: cost, roofline, sweep, throughput, generate
and version-diff (their parsers and what each runs)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

import ortlab
from ortlab.analysis.soak import PHASES
from ortlab.analysis.versions import DEFAULT_VERSIONS
from ortlab.cli.args import (
    add_session_args,
    int_arg,
    level_arg,
    levels_int_arg,
    load_feeds,
    load_model,
    providers_arg,
    read_npz,
    seconds_arg,
    session_config,
    verb_args,
    wants_progress,
)
from ortlab.cli.llmbench import int_list
from ortlab.core.config import LEVELS
from ortlab.core.errors import FeedError, OptionError
from ortlab.core.grammar import parse_dims, version_pair

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

    import numpy as np


def _throughput_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("throughput", help="requests/s and latency per concurrency level")
    add_session_args(p)
    p.add_argument("--concurrency", type=levels_int_arg, default=[1, 2, 4], help="e.g. 1,2,4")
    p.add_argument("--modes", default="shared,per_thread", help="shared,per_thread")
    p.add_argument("--rounds", type=int_arg(1), default=6, help="interleaved rounds")
    p.add_argument("--duration", type=seconds_arg, default=0.5, help="seconds per window")


def _why_slow_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """cost, roofline, sweep: whether the time is reasonable, and how it scales."""
    p = sub.add_parser("cost", help="FLOPs and bytes per node at the run's shapes (computed)")
    add_session_args(p)
    p.add_argument("--top", type=int_arg(1), default=15, help="rows in the tables")
    p = sub.add_parser("roofline", help="each node's measured time against this machine's peaks")
    add_session_args(p)
    p.add_argument("--runs", type=int_arg(1), default=20)
    p.add_argument("--top", type=int_arg(1), default=15, help="rows in the node table")
    p = sub.add_parser("sweep", help="latency, placement and memory per input shape")
    p.add_argument("model", help="path to a .onnx file, or a bundled example name")
    p.add_argument(
        "--dim",
        action="append",
        type=_sweep_arg,
        required=True,
        metavar="NAME=V,V,..",
        help="a dim and its values (repeat for more dims: every combination runs)",
    )
    p.add_argument("--providers", type=providers_arg, default=["cpu"])
    p.add_argument("--level", type=level_arg, default="all", help=" | ".join(LEVELS))
    p.add_argument("--targets", default="", help="what-if targets to predict (qnn,nnapi,…)")
    p.add_argument("--runs", type=int_arg(3), default=30, help="timed runs per shape")
    p.add_argument("--json", action="store_true")


def _soak_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "soak",
        help="does memory grow run after run? same inputs, fresh inputs, fresh shapes; "
        "each memory setting in a process of its own",
    )
    add_session_args(p)
    p.add_argument("--runs", type=int_arg(10), default=60, help="runs per phase")
    p.add_argument(
        "--phases",
        type=_phases_arg,
        default=",".join(PHASES),
        help=f"comma-separated, of: {', '.join(PHASES)}",
    )


def _phases_arg(text: str) -> list[str]:
    phases = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in phases if t not in PHASES]
    if unknown or not phases:
        raise argparse.ArgumentTypeError(f"{text!r}: choose from {', '.join(PHASES)}")
    return phases


def _soak(args: argparse.Namespace) -> None:
    m, cfg, feeds, reach = verb_args(args)
    phases = args.phases if isinstance(args.phases, list) else _phases_arg(args.phases)
    r = ortlab.soak(m, cfg, feeds, runs=args.runs, phases=phases, **reach)
    print(r.to_json() if args.json else r.to_text())


def _version_diff_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "version-diff",
        help="the model under two onnxruntime versions, per node "
        "(each version installed once from PyPI into ortlab's cache)",
    )
    add_session_args(p)
    p.add_argument(
        "--versions",
        type=_versions_arg,
        default=",".join(DEFAULT_VERSIONS),
        help="two onnxruntime versions, A,B",
    )
    p.add_argument(
        "--rounds",
        type=int_arg(1),
        default=6,
        help="sessions per version, profiled in turns A B B A ...",
    )
    p.add_argument("--runs", type=int_arg(1), default=5, help="profiled runs per session")
    p.add_argument("--top", type=int_arg(1), default=20, help="rows in the node table")


def _cost(args: argparse.Namespace) -> None:

    m, cfg, feeds, reach = verb_args(args)
    c = ortlab.cost(m, cfg, feeds, **reach)
    print(c.to_json() if args.json else c.to_text(top=args.top))


def _roofline(args: argparse.Namespace) -> None:

    m, cfg, feeds, reach = verb_args(args)
    r = ortlab.roofline(m, cfg, feeds, runs=args.runs, **reach)
    print(r.to_json() if args.json else r.to_text(top=args.top))


def _sweep_arg(text: str) -> tuple[str, list[int]]:
    """``--dim batch=1,2,4`` (one dim each): the one grammar (``core.grammar.parse_dims``)."""
    try:
        parsed = parse_dims(text, many=True)
    except FeedError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    if len(parsed) != 1:
        raise argparse.ArgumentTypeError(f"{text!r}: one dim per --dim, e.g. --dim batch=1,2,4")
    return next(iter(parsed.items()))


def _sweep(args: argparse.Namespace) -> None:

    m = load_model(args.model, getattr(args, "part", None))
    cfg = ortlab.SessionConfig(providers=args.providers, level=args.level)
    s = ortlab.sweep(
        m,
        cfg,
        dims=dict(args.dim),
        targets=args.targets,
        runs=args.runs,
        progress=wants_progress(args),
    )
    print(s.to_json() if args.json else s.to_text())


def _throughput(args: argparse.Namespace) -> None:
    m, cfg, feeds, reach = verb_args(args)
    t = ortlab.throughput(
        m,
        cfg,
        feeds,
        concurrency=args.concurrency,
        modes=args.modes.split(","),
        rounds=args.rounds,
        duration_s=args.duration,
        **reach,
    )
    print(t.to_json() if args.json else t.to_text())


def _generate_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "generate",
        help="an LLM decoder token by token: TTFT, prefill and decode tokens/s, the KV cache",
        description="Generate token by token with an LLM decoder or an encoder-decoder: a .onnx "
        "file or its folder (onnxruntime-genai's, with genai_config.json; optimum's, with "
        "config.json). --feeds FILE.npz gives the prompt's input_ids alone (the mask, "
        "positions and cache are built each step); for an encoder-decoder, the encoder's "
        "inputs.",
    )
    add_session_args(p)
    p.add_argument(
        "--prompt",
        type=int_arg(1),
        default=None,
        help="prompt tokens (the prefill; 128 unless --dims prompt=N says); --dims also "
        "takes batch=N",
    )
    p.add_argument("--new", type=int_arg(1), default=64, help="tokens to generate")
    p.add_argument(
        "--runs", type=int_arg(1), default=6, help="generations (6 or more give intervals)"
    )
    p.add_argument(
        "--decoder-prompt",
        type=int_list,
        default=None,
        help="an encoder-decoder's decoder start ids, e.g. 50258,50259 (default: the folder's "
        "decoder_start_token_id); --feeds then holds the encoder's inputs",
    )


def _generate(args: argparse.Namespace) -> None:
    m = load_model(args.model, getattr(args, "part", None))
    d = m.decoder
    takes = ortlab.load(m.path.parent / d.encoder) if d is not None and d.encoder else m
    if d is not None and not d.seq2seq and args.feeds is not None:
        feeds: Mapping[str, np.ndarray] | None = read_npz(args.feeds, m)  # input_ids alone do
    else:
        feeds = load_feeds(args.feeds, takes)
    g = ortlab.generate(
        m,
        session_config(args),
        feeds,
        dims=args.dims,
        prompt=args.prompt,
        new_tokens=args.new,
        runs=args.runs,
        decoder_prompt=args.decoder_prompt,
        progress=wants_progress(args),
    )
    print(g.to_json() if args.json else g.to_text())


def _versions_arg(text: str) -> list[str]:
    try:
        return version_pair(text)
    except OptionError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def _version_diff(args: argparse.Namespace) -> None:

    m, cfg, feeds, reach = verb_args(args)
    versions = args.versions if isinstance(args.versions, list) else _versions_arg(args.versions)
    r = ortlab.version_diff(
        m, cfg, feeds, versions=versions, rounds=args.rounds, runs=args.runs, **reach
    )
    print(r.to_json() if args.json else r.to_text(top=args.top))


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The subcommands of this module."""
    _why_slow_parsers(sub)
    _throughput_parser(sub)
    _generate_parser(sub)
    _version_diff_parser(sub)
    _soak_parser(sub)


HANDLERS: dict[str, Callable[[argparse.Namespace], None]] = {
    "cost": _cost,
    "roofline": _roofline,
    "sweep": _sweep,
    "throughput": _throughput,
    "generate": _generate,
    "version-diff": _version_diff,
    "soak": _soak,
}
