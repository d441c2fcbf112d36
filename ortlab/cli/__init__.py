"""The ``ortlab`` command: inspect, bench, profile, place, optimize, quantize, doctor, report,
whatif, providers, examples, cache; cost, roofline, sweep, throughput and version-diff live in
:mod:`ortlab.cli.perf`.

Human tables by default, ``--json`` for the result's ``to_json()``. Exit status: 0 done; 2 a
user error — bad arguments (argparse's usage message) or an :class:`OrtlabError` (ortlab's
message: what failed, what is available, how to fix); 1 an internal error, reported in one line
that names the verb, the model and the exception (``ORTLAB_DEBUG=1`` adds the traceback). No
path prints a raw traceback. Warnings (a requested execution provider that did not load) go to
stderr as one ``ortlab: warning: …`` line each.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import ortlab
from ortlab.analysis.placement.whatifresult import DEFAULT_TARGETS
from ortlab.cli import diverge, fleet, llmbench, perf
from ortlab.cli.args import (
    add_node_data_arg,
    add_session_args,
    add_shapes_args,
    int_arg,
    levels_arg,
    load_feeds,
    load_model,
    option_arg,
    seconds_arg,
    session_config,
    targets_arg,
    verb_args,
    wants_progress,
    write_node_data,
)
from ortlab.core import cache, telemetry
from ortlab.core.config import LEVELS
from ortlab.core.errors import OrtlabError, OrtlabWarning
from ortlab.core.units import fmt_bytes
from ortlab.core.version import __version__
from ortlab.core.workshop import copy_notebooks
from ortlab.engine.providers import providers
from ortlab.engine.session import warn_if_fallback
from ortlab.views.accelerators import providers_text
from ortlab.views.html import safe_text

if TYPE_CHECKING:
    import argparse

    from ortlab.core.config import SessionConfig
    from ortlab.core.model import Model
    from ortlab.diagnosis.doctor import DoctorResult

__all__ = ["main"]


def _doctor_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("doctor", help="find what slows the session down; every fix measured")
    add_session_args(p)
    p.add_argument("--budget", type=seconds_arg, default=120, help="seconds to spend measuring")
    p.add_argument("--no-quantize", action="store_true", help="do not try int8 variants")
    p.add_argument(
        "--objective",
        choices=("latency", "cpu"),
        default="latency",
        help="choose the best for the shortest run (default) or the least CPU per run",
    )
    p.add_argument("-o", "--output", help="also write the JSON result to this file")
    p = sub.add_parser("report", help="self-contained HTML report (runs the doctor first)")
    add_session_args(p)
    p.add_argument("-o", "--output", required=True, help="the .html file to write")
    p.add_argument("--budget", type=seconds_arg, default=60, help="the doctor's time budget (s)")
    p.add_argument("--no-doctor", action="store_true", help="profile and levels only")
    p.add_argument(
        "--targets",
        help="also predict placement on these (e.g. qnn,nnapi,coreml): "
        "a what-if section, labelled as predicted",
    )


def _quantize_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("quantize", help="build a quantized or fp16 variant (written to -o)")
    p.add_argument("model")
    p.add_argument("--mode", default="static", choices=["static", "dynamic", "fp16", "int4"])
    p.add_argument("--format", default="qdq", choices=["qdq", "qoperator"])
    p.add_argument("--per-channel", action="store_true")
    p.add_argument("--method", default="minmax", choices=["minmax", "entropy", "percentile"])
    p.add_argument("--calibration", help="folder of .npy/.npz samples (default: synthetic)")
    p.add_argument("--samples", type=int_arg(1), default=16, help="calibration samples to use")
    p.add_argument("--block-size", type=int_arg(16), default=32, help="int4: weights per block")
    p.add_argument(
        "--accuracy-level",
        type=int,
        choices=[0, 1, 2, 3, 4],
        default=None,
        help="int4: MatMulNBits compute type (4: int8 activations)",
    )
    add_shapes_args(p)  # the shapes of synthesized calibration samples (the shapes you run at)
    p.add_argument("-o", "--output", help="where to write the variant (never the input)")
    p.add_argument("--json", action="store_true")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ortlab", description="See inside ONNX Runtime: placement, fusions, per-op time."
    )
    parser.add_argument("--version", action="version", version=f"ortlab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inspect", help="summarise a model (no session)")
    p.add_argument("model")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("bench", help="latency benchmark, profiling off")
    add_session_args(p)
    p.add_argument("--runs", type=int_arg(1), default=100)
    p.add_argument("--warmup", type=int_arg(0), default=10)
    p.add_argument(
        "--duration", type=seconds_arg, default=None, help="stop after this many seconds"
    )
    p = sub.add_parser("profile", help="per-node / per-op / per-EP time from ORT's profiler")
    add_session_args(p)
    p.add_argument("--runs", type=int_arg(1), default=20)
    p.add_argument("--warmup", type=int_arg(0), default=3)
    p.add_argument("--top", type=int_arg(1), default=15, help="rows in the top-nodes table")
    p.add_argument(
        "--perfetto",
        metavar="OUT.json",
        default=None,
        help="also write the trace for ui.perfetto.dev / chrome://tracing (original "
        "node names from the placement join of the same session)",
    )
    add_node_data_arg(p, "time (µs per run)")
    perf.add_parsers(sub)
    llmbench.add_parsers(sub)
    diverge.add_parsers(sub)
    fleet.add_parsers(sub)
    p = sub.add_parser("place", help="where each node runs: partitions, boundaries, time per EP")
    add_session_args(p)
    p.add_argument("--runs", type=int_arg(1), default=5)
    add_node_data_arg(p, "execution provider")
    p = sub.add_parser("optimize", help="what each optimization level changes, and its latency")
    add_session_args(p)
    p.add_argument("--levels", type=levels_arg, default=",".join(LEVELS))
    p.add_argument("--rounds", type=int_arg(1), default=8, help="interleaved timing rounds")
    p.add_argument("--runs", type=int_arg(1), default=10, help="runs per level per round")
    p.add_argument("--no-timing", action="store_true", help="only the graph diff")
    _quantize_parser(sub)
    _doctor_parsers(sub)
    p = sub.add_parser(
        "whatif", help="where it would run on NPUs/EPs not here (predicted), and why it falls back"
    )
    p.add_argument("model", help="path to a .onnx file, or a bundled example name")
    p.add_argument(
        "--targets",
        type=targets_arg,
        default=",".join(DEFAULT_TARGETS),
        help=f"comma-separated: {', '.join(DEFAULT_TARGETS)} (or any EP alias)",
    )
    p.add_argument(
        "--qnn-option",
        action="append",
        type=option_arg,
        default=[],
        metavar="KEY=VALUE",
        help="a QNN provider option, e.g. htp_arch=73 (repeatable)",
    )
    add_shapes_args(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p = sub.add_parser("providers", help="EPs in this build, which really load, real devices")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("examples", help="list the bundled models")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("notebooks", help="copy the workshop notebooks into a folder")
    p.add_argument("folder", help="where to copy them (created if missing)")
    p.add_argument("--force", action="store_true", help="replace notebooks already there")
    p = sub.add_parser("cache", help="show or empty ortlab's cache directory")
    p.add_argument("action", choices=["info", "clear"])
    for command in sub.choices.values():
        _say_defaults(command)
    return parser


def _say_defaults(p: argparse.ArgumentParser) -> None:
    """Each option's help ends with its default ("--runs RUNS  (default: 100)"), except where
    there is none to say (a flag off, an option left unset)."""
    for action in p._actions:
        default = action.default
        unset = default is None or default is False or default is argparse.SUPPRESS
        if not action.option_strings or unset or default in ([], ()):
            continue
        if "%(default)" in (action.help or ""):
            continue
        shown = ",".join(map(str, default)) if isinstance(default, list | tuple) else default
        action.help = f"{action.help or ''} (default: {shown})".strip().replace("%", "%%")


# ---------------------------------------------------------------------- the verbs


def _inspect(args: argparse.Namespace) -> None:
    m = load_model(args.model, getattr(args, "part", None))
    print(m.summary.to_json(indent=2) if args.json else m.summary.to_text())


def _bench(args: argparse.Namespace) -> None:

    m, cfg, feeds, reach = verb_args(args)
    b = ortlab.benchmark(
        m, cfg, feeds, runs=args.runs, warmup=args.warmup, duration_s=args.duration, **reach
    )
    print(b.to_json(indent=2) if args.json else b.to_text())


def _profile(args: argparse.Namespace) -> None:

    from ortlab.views.profile import fused_map

    m, cfg, feeds, reach = verb_args(args)
    # The placement join runs the same profiled runs and maps every kernel of ORT's final
    # graph to the model's nodes it computes: the table names kernels as the Lab, the graph
    # and the report do ("p2o.Conv.12 + 2 more (kernel r169_nchwc)"), not ORT's "r169_nchwc".
    pl = ortlab.placement(m, cfg, feeds, runs=args.runs, warmup=args.warmup, **reach)
    assert pl.profile is not None
    p = pl.profile
    print(p.to_json() if args.json else p.to_text(top=args.top, fused=fused_map(pl, p)))
    if args.perfetto:
        out = pl.to_perfetto(args.perfetto, model=m)
        print(
            f"Perfetto trace written to {out} (open it at ui.perfetto.dev or chrome://tracing)",
            file=sys.stderr if args.json else sys.stdout,
        )
    write_node_data(args, m, "time", placement=pl)


def _place(args: argparse.Namespace) -> None:

    m, cfg, feeds, reach = verb_args(args)
    pl = ortlab.placement(m, cfg, feeds, runs=args.runs, **reach)
    print(pl.to_json(indent=2) if args.json else pl.to_text())
    write_node_data(args, m, "provider", placement=pl)


def _optimize(args: argparse.Namespace) -> None:

    m, cfg, feeds, reach = verb_args(args)
    opt = ortlab.optimization_diff(
        m,
        args.levels,
        cfg,
        feeds,
        rounds=args.rounds,
        runs=args.runs,
        measure=not args.no_timing,
        **reach,
    )
    print(opt.to_json() if args.json else opt.to_text())


def _doctor(args: argparse.Namespace) -> None:

    m = load_model(args.model, getattr(args, "part", None))
    cfg = session_config(args)
    d = ortlab.doctor(
        m,
        cfg,
        load_feeds(args.feeds, m),
        dims=args.dims,
        budget_s=args.budget,
        quantize=not args.no_quantize,
        objective=args.objective,
        progress=wants_progress(args),
    )
    _warn_fallback(d, cfg, m)
    if args.output:
        d.save(args.output)
    print(d.to_json(indent=2) if args.json else d.to_text())


def _report(args: argparse.Namespace) -> None:

    m, cfg = load_model(args.model, getattr(args, "part", None)), session_config(args)
    feeds = load_feeds(args.feeds, m)
    d = profile = None
    if not args.no_doctor:
        d = ortlab.doctor(
            m, cfg, feeds, dims=args.dims, budget_s=args.budget, progress=wants_progress(args)
        )
        _warn_fallback(d, cfg, m)
    if d is None:  # profiled here (as report() would) so that a fallback is said
        profile = ortlab.profile(
            m, cfg, feeds, dims=args.dims, runs=10, progress=wants_progress(args)
        )
    w = None
    if args.targets:  # every part at the same shapes: the dims, as each verb resolves them
        w = ortlab.whatif(
            m, args.targets, feeds=feeds, dims=args.dims, progress=wants_progress(args)
        )
    out = ortlab.report(
        m,
        d,
        path=args.output,
        config=cfg,
        feeds=feeds,
        dims=args.dims,
        profile=profile,
        whatif=w,
        progress=wants_progress(args),
    )
    size = out.stat().st_size
    if args.json:
        doc = None if d is None else json.loads(d.to_json())
        print(json.dumps({"report": str(out), "bytes": size, "doctor": doc}, indent=2))
        return
    print(f"wrote {out} ({size / 1e6:.1f} MB): open it in any browser")


def _warn_fallback(d: DoctorResult, cfg: SessionConfig, m: Model) -> None:
    """The doctor measures with fallback allowed (it reports a fallback as a finding); the
    command line also says it on stderr, as every other verb does."""

    if d.profile is not None and d.profile.report is not None:
        warn_if_fallback(d.profile.report, cfg, m.name)


def _quantize(args: argparse.Namespace) -> None:
    import shutil

    m = load_model(args.model, getattr(args, "part", None))
    cfg = ortlab.QuantConfig(
        mode=args.mode,
        format=args.format,
        per_channel=args.per_channel,
        method=args.method,
        calibration=args.calibration,
        calibration_size=args.samples,
        block_size=args.block_size,
        accuracy_level=args.accuracy_level,
    )
    q = ortlab.quantize(m, cfg, dims=args.dims, feeds=load_feeds(args.feeds, m))
    target = q.path
    if args.output:
        target = Path(args.output)
        if target.exists() and target.resolve() == m.path.resolve():
            raise ortlab.QuantizationError(
                f"-o {args.output} is the input model: ortlab never overwrites it. "
                "Pick another path."
            )
        shutil.copyfile(q.path, target)
        data = q.path.with_name(q.path.name + ".data")
        if data.exists():  # external data: the model names this file, beside it
            shutil.copyfile(data, target.parent / data.name)
            print(
                f"ortlab: the weights are in {target.parent / data.name}, beside the model; "
                "keep them together",
                file=sys.stderr,
            )
    info = q.variant
    if args.json:
        print(
            json.dumps(
                {
                    "variant": info.label,
                    "path": str(target),
                    "bytes": q.disk_bytes,
                    "steps": info.steps,
                    "calibration": info.calibration,
                    "synthetic_calibration": info.synthetic_calibration,
                },
                indent=2,
            )
        )
        return
    size, fp32 = fmt_bytes(q.disk_bytes), fmt_bytes(m.disk_bytes)  # external data included
    print(f"{info.label} variant of {safe_text(m.name)}: {target} ({size}, fp32 {fp32})")
    for step in info.steps:
        print(f"  step: {step}")
    print(
        f"  calibration: {info.calibration}"
        + (" (SYNTHETIC)" if info.synthetic_calibration else "")
    )


def _examples(args: argparse.Namespace) -> None:

    info = ortlab.examples.describe()
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        width = max(map(len, info))
        print("\n".join(f"{k:<{width}}  {v}" for k, v in info.items()))


def _notebooks(args: argparse.Namespace) -> None:
    copied = copy_notebooks(
        args.folder, overwrite=args.force, replace_hint="run it again with --force"
    )
    folder = copied[0].parent if copied else Path(args.folder)
    print(f"copied {len(copied)} notebooks to {folder}; open them with: jupyter lab {folder}")


def _cache(args: argparse.Namespace) -> None:

    if args.action == "clear":
        print(f"Emptied {cache.cache_dir()}: freed {fmt_bytes(cache.clear())}")
    else:
        print(
            f"{cache.cache_dir()}: {fmt_bytes(cache.size_bytes())} of at most "
            f"{fmt_bytes(cache.max_bytes())} (ORTLAB_CACHE_MAX_BYTES); least recently used "
            "entries go first. `ortlab cache clear` empties it."
        )


def _providers_cmd(args: argparse.Namespace) -> None:
    _providers(args.json)


def _providers(as_json: bool) -> None:
    info = providers()
    said = telemetry.state()
    if as_json:
        print(
            json.dumps({**info.to_dict(), "runtime_telemetry": dataclasses.asdict(said)}, indent=2)
        )
    else:
        print(providers_text(info) + f"\nruntime telemetry: {said.line()}")


def _whatif(args: argparse.Namespace) -> None:

    m = load_model(args.model, getattr(args, "part", None))
    targets = args.targets if isinstance(args.targets, list) else targets_arg(args.targets)
    w = ortlab.whatif(
        m,
        targets,
        dims=args.dims,
        feeds=load_feeds(args.feeds, m),
        qnn_options=dict(args.qnn_option),
        progress=wants_progress(args),
    )
    print(w.to_json(indent=2) if args.json else w.to_text())


_HANDLERS: dict[str, Callable[[argparse.Namespace], int | None]] = {
    "inspect": _inspect,
    "bench": _bench,
    "profile": _profile,
    "place": _place,
    "optimize": _optimize,
    "quantize": _quantize,
    "examples": _examples,
    "notebooks": _notebooks,
    "cache": _cache,
    "providers": _providers_cmd,
    "doctor": _doctor,
    "report": _report,
    "whatif": _whatif,
    **perf.HANDLERS,
    **llmbench.HANDLERS,
    **diverge.HANDLERS,
    **fleet.HANDLERS,
}


# ---------------------------------------------------------------------- main


def _debug() -> bool:
    return os.environ.get("ORTLAB_DEBUG", "") not in ("", "0")


def _show_warning(  # noqa: PLR0917 - warnings.showwarning's signature
    message: Warning | str,
    category: type[Warning],
    filename: str,  # noqa: ARG001 - warnings.showwarning's signature
    lineno: int,  # noqa: ARG001
    file: TextIO | None = None,
    line: str | None = None,  # noqa: ARG001
) -> None:
    """One readable line per warning, instead of Python's ``file:line: Category: text``."""

    text = " ".join(str(message).split())
    kind = "" if issubclass(category, OrtlabWarning) else f"{category.__name__}: "
    print(f"ortlab: warning: {kind}{safe_text(text, 2000)}", file=file or sys.stderr)


def _internal_error(err: Exception, args: argparse.Namespace) -> None:

    where = args.command + (f" on {args.model}" if getattr(args, "model", None) else "")
    message = " ".join(str(err).split()) or "(no message)"
    if _debug():
        traceback.print_exc()
        how = "the traceback is above"
    else:
        how = "re-run with ORTLAB_DEBUG=1 for the traceback"
    print(
        f"ortlab: internal error in {safe_text(where)}: {type(err).__name__}: "
        f"{safe_text(message, 2000)} — this is a bug in ortlab; {how}",
        file=sys.stderr,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (argparse's own exits included)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as done:  # --help, --version, or a usage error (already printed)
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 2)
    with warnings.catch_warnings():
        # Say every provider fallback, even where warnings are filtered or made errors.
        warnings.filterwarnings("default", category=OrtlabWarning)
        warnings.showwarning = _show_warning
        try:
            code = _HANDLERS[args.command](args)
        except OrtlabError as err:
            if _debug():
                traceback.print_exc()
            print(f"ortlab: error: {safe_text(err, 5000)}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("ortlab: interrupted", file=sys.stderr)
            return 130
        except Exception as err:  # noqa: BLE001 - a bug: one line, never a raw traceback
            _internal_error(err, args)
            return 1
    return code or 0
