"""The ``ortlab`` command: inspect, bench, profile, place, optimize, quantize, doctor, report,
providers, examples, cache.

Human tables by default, ``--json`` for the result's ``to_json()``. Exit status: 0 done; 2 a
user error — bad arguments (argparse's usage message) or an :class:`OrtlabError` (ortlab's
message: what failed, what is available, how to fix); 1 an internal error, reported in one line
that names the verb, the model and the exception (``ORTLAB_DEBUG=1`` adds the traceback). No
path prints a raw traceback. Warnings (a requested execution provider that did not load) go to
stderr as one ``ortlab: warning: …`` line each.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import traceback
import warnings
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import ortlab
from ortlab.analysis.whatif import DEFAULT_TARGETS
from ortlab.core import cache
from ortlab.core.config import LEVELS, canonical_level, canonical_provider
from ortlab.core.errors import FeedError, OrtlabError, OrtlabWarning
from ortlab.core.inputs import validate_feeds
from ortlab.core.units import fmt_bytes
from ortlab.core.version import __version__
from ortlab.engine import examples
from ortlab.engine.providers import providers
from ortlab.engine.session import warn_if_fallback
from ortlab.views.render import safe_text
from ortlab.views.render_more import providers_text

__all__ = ["main"]


def _model(spec: str) -> Any:

    if Path(spec).exists() or spec not in examples.names():
        return ortlab.load(spec)
    return examples.load(spec)


# ---------------------------------------------------------------------- argument types
# Parsed by argparse itself, so a bad value exits 2 with the usage line, like any other
# argument error ("ortlab bench: error: argument --dims: …").


def _dims_arg(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.strip() or not value.strip().isdigit():
            raise argparse.ArgumentTypeError(
                f"expects name=int[,name=int] (e.g. batch=1,sequence=128), got {part.strip()!r}"
            )
        out[name.strip()] = int(value)
    return out


def _targets_arg(text: str) -> list[str]:
    from ortlab.core.eps import PROVIDER_ALIASES

    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in PROVIDER_ALIASES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown target {', '.join(unknown) or '(none)'}: use {', '.join(DEFAULT_TARGETS)} "
            "or an EP alias (cpu, cuda, trt, dml…)"
        )
    return names


def _option_arg(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"expects key=value (e.g. htp_arch=73), got {text!r}")
    return key.strip(), value.strip()


def _providers_arg(text: str) -> list[str] | str:

    if text.strip().lower() == "auto":
        return "auto"
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give at least one provider, e.g. cpu or cuda,cpu")
    try:
        for name in names:
            canonical_provider(name)
    except OrtlabError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    return names


def _level_arg(text: str) -> str:

    try:
        return canonical_level(text)
    except OrtlabError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def _levels_arg(text: str) -> list[str]:
    levels = [_level_arg(lv) for lv in text.split(",") if lv.strip()]
    if not levels:
        raise argparse.ArgumentTypeError("give at least one level, e.g. disabled,all")
    return levels


def _int_arg(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expects an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expects an integer >= {low}, got {value}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


def _seconds_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects seconds, got {text!r}") from None
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expects seconds > 0, got {text}")
    return value


def _levels_int_arg(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects integers like 1,2,4, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expects positive integers like 1,2,4, got {text!r}")
    return sorted(set(values))


def _config(args: argparse.Namespace) -> Any:

    return ortlab.SessionConfig(
        providers=args.providers,
        level=args.level,
        intra_op_threads=args.threads,
        inter_op_threads=args.inter_threads,
        execution_mode=args.mode,
        allow_spinning=None if args.spinning is None else args.spinning == "on",
        io_binding=args.io_binding,
        fallback="warn",
    )


def _feeds(path: str | None, m: Any) -> Any:
    """The arrays of ``--feeds file.npz`` (one per input, by name), validated against ``m``."""
    if path is None:
        return None
    import numpy as np

    takes = ", ".join(f"{t.name}: {t.dtype}{t.shape_text()}" for t in m.inputs)
    example = ", ".join(f"{t.name!r}: ..." for t in m.inputs)
    how = (
        f"{m.name!r} takes: {takes}. Save one array per input, named by input: "
        f"np.savez('feeds.npz', **{{{example}}})."
    )
    p = Path(path)
    if not p.is_file():
        raise FeedError(f"--feeds {path}: no such file. {how}")
    try:
        data = np.load(p, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise FeedError(
                f"--feeds {path} holds a single .npy array, not an .npz of arrays by input "
                f"name. {how}"
            )
        with data:
            arrays = {name: data[name] for name in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        if isinstance(err, FeedError):
            raise
        raise FeedError(f"--feeds {path} is not a readable .npz file ({err}). {how}") from err
    try:
        return validate_feeds(m, arrays)
    except FeedError as err:  # its fixes are Python calls: a shell user gets a file's fix
        text = re.sub(r" \(fix: feeds\[.*?\)\)", "", str(err))
        text = text.replace(" model.example_inputs() builds matching feeds.", "")
        raise FeedError(
            f"--feeds {path}: {text} Write the file again with those names, dtypes and "
            f"shapes (e.g. np.savez('feeds.npz', **{{{example}}}) in Python), or leave out "
            "--feeds and ortlab synthesizes inputs (--dims sets their sizes)."
        ) from err


# ---------------------------------------------------------------------- the parser


def _shapes_args(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument("--dims", type=_dims_arg, help="symbolic dims, e.g. batch=1,sequence=128")
    group.add_argument(
        "--feeds",
        metavar="FILE.npz",
        help="the inputs to run with: an .npz with one array per input name "
        "(sets every shape, unnamed dims and state inputs included)",
    )


def _session_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="path to a .onnx file, or a bundled example name")
    p.add_argument(
        "--providers",
        type=_providers_arg,
        default=["cpu"],
        help="comma-separated EPs (cpu,cuda,trt,openvino…) or 'auto'",
    )
    p.add_argument("--level", type=_level_arg, default="all", help=" | ".join(LEVELS))
    p.add_argument(
        "--threads", type=_int_arg(0), default=0, help="intra-op threads (0 = ORT default)"
    )
    p.add_argument("--inter-threads", type=_int_arg(0), default=0, help="inter-op threads")
    p.add_argument("--mode", default="sequential", choices=["sequential", "parallel"])
    p.add_argument("--spinning", choices=["on", "off"], default=None, help="intra-op spinning")
    p.add_argument("--io-binding", action="store_true", help="run through IOBinding")
    _shapes_args(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _doctor_parsers(sub: Any) -> None:
    p = sub.add_parser("doctor", help="find what slows the session down; every fix measured")
    _session_args(p)
    p.add_argument("--budget", type=_seconds_arg, default=120, help="seconds to spend measuring")
    p.add_argument("--no-quantize", action="store_true", help="do not try int8 variants")
    p.add_argument("-o", "--output", help="also write the JSON result to this file")
    p = sub.add_parser("report", help="self-contained HTML report (runs the doctor first)")
    _session_args(p)
    p.add_argument("-o", "--output", required=True, help="the .html file to write")
    p.add_argument("--budget", type=_seconds_arg, default=60, help="the doctor's time budget (s)")
    p.add_argument("--no-doctor", action="store_true", help="profile and levels only")
    p.add_argument("--targets", help="also predict placement on these (e.g. qnn,nnapi,coreml): "
                   "a what-if section, labelled as predicted")  # fmt: skip


def _throughput_parser(sub: Any) -> None:
    p = sub.add_parser("throughput", help="requests/s and latency per concurrency level")
    _session_args(p)
    p.add_argument("--concurrency", type=_levels_int_arg, default=[1, 2, 4], help="e.g. 1,2,4")
    p.add_argument("--modes", default="shared,per_thread", help="shared,per_thread")
    p.add_argument("--rounds", type=_int_arg(1), default=6, help="interleaved rounds")
    p.add_argument("--duration", type=_seconds_arg, default=0.5, help="seconds per window")


def _quantize_parser(sub: Any) -> None:
    p = sub.add_parser("quantize", help="build a quantized or fp16 variant (written to -o)")
    p.add_argument("model")
    p.add_argument("--mode", default="static", choices=["static", "dynamic", "fp16", "int4"])
    p.add_argument("--format", default="qdq", choices=["qdq", "qoperator"])
    p.add_argument("--per-channel", action="store_true")
    p.add_argument("--method", default="minmax", choices=["minmax", "entropy", "percentile"])
    p.add_argument("--calibration", help="folder of .npy/.npz samples (default: synthetic)")
    p.add_argument("--samples", type=_int_arg(1), default=16, help="calibration samples to use")
    p.add_argument("--block-size", type=_int_arg(16), default=32, help="int4: weights per block")
    p.add_argument("--accuracy-level", type=int, choices=[0, 1, 2, 3, 4], default=None,
                   help="int4: MatMulNBits compute type (4: int8 activations)")  # fmt: skip
    _shapes_args(p)  # the shapes of synthesized calibration samples (the shapes you run at)
    p.add_argument("-o", "--output", help="where to write the variant (never the input)")
    p.add_argument("--json", action="store_true")


def _why_slow_parsers(sub: Any) -> None:
    """cost, roofline, sweep: whether the time is reasonable, and how it scales."""
    p = sub.add_parser("cost", help="FLOPs and bytes per node at the run's shapes (computed)")
    _session_args(p)
    p.set_defaults(level=None)  # no --level: the model's own nodes (optimizations disabled)
    p.add_argument("--top", type=_int_arg(1), default=15, help="rows in the tables")
    p = sub.add_parser("roofline", help="each node's measured time against this machine's peaks")
    _session_args(p)
    p.add_argument("--runs", type=_int_arg(1), default=20)
    p.add_argument("--top", type=_int_arg(1), default=15, help="rows in the node table")
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
    p.add_argument("--providers", type=_providers_arg, default=["cpu"])
    p.add_argument("--level", type=_level_arg, default="all", help=" | ".join(LEVELS))
    p.add_argument("--targets", default="", help="what-if targets to predict (qnn,nnapi,…)")
    p.add_argument("--runs", type=_int_arg(3), default=30, help="timed runs per shape")
    p.add_argument("--json", action="store_true")


def _version_diff_parser(sub: Any) -> None:
    p = sub.add_parser("version-diff", help="the model under two onnxruntime versions, per node "
                       "(each version installed once from PyPI into ortlab's cache)")  # fmt: skip
    _session_args(p)
    p.add_argument("--versions", type=_versions_arg, default="1.31.1,1.32.0",
                   help="two onnxruntime versions, A,B (default 1.31.1,1.32.0)")  # fmt: skip
    p.add_argument("--rounds", type=_int_arg(1), default=6,
                   help="sessions per version, profiled in turns A B B A ...")  # fmt: skip
    p.add_argument("--runs", type=_int_arg(1), default=5, help="profiled runs per session")
    p.add_argument("--top", type=_int_arg(1), default=20, help="rows in the node table")


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
    _session_args(p)
    p.add_argument("--runs", type=_int_arg(1), default=100)
    p.add_argument("--warmup", type=_int_arg(0), default=10)
    p.add_argument(
        "--duration", type=_seconds_arg, default=None, help="stop after this many seconds"
    )
    p = sub.add_parser("profile", help="per-node / per-op / per-EP time from ORT's profiler")
    _session_args(p)
    p.add_argument("--runs", type=_int_arg(1), default=20)
    p.add_argument("--warmup", type=_int_arg(0), default=3)
    p.add_argument("--top", type=_int_arg(1), default=15, help="rows in the top-nodes table")
    p.add_argument("--perfetto", metavar="OUT.json", default=None,
                   help="also write the trace for ui.perfetto.dev / chrome://tracing (original "
                   "node names from the placement join of the same session)")  # fmt: skip
    _why_slow_parsers(sub)
    _throughput_parser(sub)
    _version_diff_parser(sub)
    p = sub.add_parser("place", help="where each node runs: partitions, boundaries, time per EP")
    _session_args(p)
    p.add_argument("--runs", type=_int_arg(1), default=5)
    p = sub.add_parser("optimize", help="what each optimization level changes, and its latency")
    _session_args(p)
    p.add_argument("--levels", type=_levels_arg, default=",".join(LEVELS))
    p.add_argument("--rounds", type=_int_arg(1), default=8, help="interleaved timing rounds")
    p.add_argument("--runs", type=_int_arg(1), default=10, help="runs per level per round")
    p.add_argument("--no-timing", action="store_true", help="only the graph diff")
    _quantize_parser(sub)
    _doctor_parsers(sub)
    p = sub.add_parser(
        "whatif", help="where it would run on NPUs/EPs not here (predicted), and why it falls back"
    )
    p.add_argument("model", help="path to a .onnx file, or a bundled example name")
    p.add_argument(
        "--targets", type=_targets_arg, default=",".join(DEFAULT_TARGETS),
        help=f"comma-separated: {', '.join(DEFAULT_TARGETS)} (or any EP alias)",
    )  # fmt: skip
    p.add_argument(
        "--qnn-option", action="append", type=_option_arg, default=[], metavar="KEY=VALUE",
        help="a QNN provider option, e.g. htp_arch=73 (repeatable)",
    )  # fmt: skip
    _shapes_args(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p = sub.add_parser("providers", help="EPs in this build, which really load, real devices")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("examples", help="list the bundled models")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("cache", help="show or empty ortlab's cache directory")
    p.add_argument("action", choices=["info", "clear"])
    return parser


# ---------------------------------------------------------------------- the verbs


def _progress(args: argparse.Namespace) -> bool:
    return not args.json and sys.stderr.isatty()


def _inspect(args: argparse.Namespace) -> None:
    m = _model(args.model)
    print(m.summary.to_json(indent=2) if args.json else m.summary.to_text())


def _bench(args: argparse.Namespace) -> None:

    m = _model(args.model)
    b = ortlab.benchmark(
        m, _config(args), _feeds(args.feeds, m), runs=args.runs, warmup=args.warmup,
        duration_s=args.duration, dims=args.dims, progress=_progress(args),
    )  # fmt: skip
    print(b.to_json(indent=2) if args.json else b.to_text())


def _profile(args: argparse.Namespace) -> None:

    m = _model(args.model)
    if args.perfetto:  # the join names fused kernels after the model's nodes; same runs
        pl = ortlab.placement(
            m, _config(args), _feeds(args.feeds, m), runs=args.runs, warmup=args.warmup,
            dims=args.dims, progress=_progress(args),
        )  # fmt: skip
        assert pl.profile is not None
        p = pl.profile
        out = p.to_perfetto(args.perfetto, placement=pl, model=m)
    else:
        p = ortlab.profile(
            m, _config(args), _feeds(args.feeds, m), runs=args.runs, warmup=args.warmup,
            dims=args.dims, progress=_progress(args),
        )  # fmt: skip
    print(p.to_json() if args.json else p.to_text(top=args.top))
    if args.perfetto:
        print(f"Perfetto trace written to {out} (open it at ui.perfetto.dev or chrome://tracing)",
              file=sys.stderr if args.json else sys.stdout)  # fmt: skip


def _cost(args: argparse.Namespace) -> None:

    m = _model(args.model)
    c = ortlab.cost(
        m, args.dims, _feeds(args.feeds, m), config=None if args.level is None else _config(args),
        progress=_progress(args),
    )  # fmt: skip
    print(c.to_json() if args.json else c.to_text(top=args.top))


def _roofline(args: argparse.Namespace) -> None:

    m = _model(args.model)
    r = ortlab.roofline(m, _config(args), _feeds(args.feeds, m), dims=args.dims, runs=args.runs,
                        progress=_progress(args))  # fmt: skip
    print(r.to_json() if args.json else r.to_text(top=args.top))


def _sweep_arg(text: str) -> tuple[str, list[int]]:
    name, sep, values = text.partition("=")
    try:
        parsed = [int(v) for v in values.split(",") if v.strip()]
    except ValueError:
        parsed = []
    if not sep or not name.strip() or not parsed or min(parsed) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected NAME=V1,V2,… with positive integers, e.g. batch=1,2,4"
        )
    return name.strip(), parsed


def _sweep(args: argparse.Namespace) -> None:

    m = _model(args.model)
    cfg = ortlab.SessionConfig(providers=args.providers, level=args.level)
    s = ortlab.sweep(m, dict(args.dim), cfg, targets=args.targets, runs=args.runs,
                     progress=_progress(args))  # fmt: skip
    print(s.to_json() if args.json else s.to_text())


def _throughput(args: argparse.Namespace) -> None:
    m = _model(args.model)
    t = ortlab.throughput(
        m, _config(args), _feeds(args.feeds, m), args.concurrency, modes=args.modes.split(","),
        rounds=args.rounds, duration_s=args.duration, dims=args.dims, progress=_progress(args),
    )  # fmt: skip
    print(t.to_json() if args.json else t.to_text())


def _versions_arg(text: str) -> list[str]:
    versions = [v.strip() for v in text.split(",") if v.strip()]
    if len(versions) != 2:
        raise argparse.ArgumentTypeError(
            f"give two onnxruntime versions separated by a comma, e.g. 1.31.1,1.32.0 (got {text!r})"
        )
    return versions


def _version_diff(args: argparse.Namespace) -> None:

    m = _model(args.model)
    versions = args.versions if isinstance(args.versions, list) else _versions_arg(args.versions)
    r = ortlab.version_diff(m, _config(args), _feeds(args.feeds, m), versions=versions,
                            rounds=args.rounds, runs=args.runs, dims=args.dims,
                            progress=_progress(args))  # fmt: skip
    print(r.to_json() if args.json else r.to_text(top=args.top))


def _place(args: argparse.Namespace) -> None:

    m = _model(args.model)
    pl = ortlab.placement(
        m, _config(args), _feeds(args.feeds, m), runs=args.runs, dims=args.dims,
        progress=_progress(args),
    )  # fmt: skip
    print(pl.to_json(indent=2) if args.json else pl.to_text())


def _optimize(args: argparse.Namespace) -> None:

    m = _model(args.model)
    opt = ortlab.optimization_diff(
        m, args.levels, _config(args), _feeds(args.feeds, m), rounds=args.rounds, runs=args.runs,
        dims=args.dims, measure=not args.no_timing, progress=_progress(args),
    )  # fmt: skip
    print(opt.to_json() if args.json else opt.to_text())


def _doctor(args: argparse.Namespace) -> None:

    m = _model(args.model)
    cfg = _config(args)
    d = ortlab.doctor(m, cfg, _feeds(args.feeds, m), dims=args.dims,
                      budget_s=args.budget, quantize=not args.no_quantize,
                      progress=_progress(args))  # fmt: skip
    _warn_fallback(d, cfg, m)
    if args.output:
        d.save(args.output)
    print(d.to_json(indent=2) if args.json else d.to_text())


def _report(args: argparse.Namespace) -> None:

    m, cfg = _model(args.model), _config(args)
    feeds = _feeds(args.feeds, m)
    d = profile = None
    if not args.no_doctor:
        d = ortlab.doctor(m, cfg, feeds, dims=args.dims, budget_s=args.budget,
                          progress=_progress(args))  # fmt: skip
        _warn_fallback(d, cfg, m)
    if feeds is None and args.dims:  # the report's own profile and levels: the same shapes
        feeds = m.example_inputs(dims=args.dims)
    if d is None:  # profiled here (as report() would) so that a fallback is said
        profile = ortlab.profile(m, cfg, feeds, runs=10, progress=_progress(args))
    w = None
    if args.targets:
        w = ortlab.whatif(m, args.targets, feeds=feeds, progress=_progress(args))
    out = ortlab.report(m, d, path=args.output, config=cfg, feeds=feeds, profile=profile,
                        whatif=w, progress=_progress(args))  # fmt: skip
    size = out.stat().st_size
    if args.json:
        doc = None if d is None else json.loads(d.to_json())
        print(json.dumps({"report": str(out), "bytes": size, "doctor": doc}, indent=2))
        return
    print(f"wrote {out} ({size / 1e6:.1f} MB): open it in any browser")


def _warn_fallback(d: Any, cfg: Any, m: Any) -> None:
    """The doctor measures with fallback allowed (it reports a fallback as a finding); the
    command line also says it on stderr, as every other verb does."""

    report = getattr(d.profile, "report", None)
    if report is not None:
        warn_if_fallback(report, cfg, m.name)


def _quantize(args: argparse.Namespace) -> None:
    import shutil

    m = _model(args.model)
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
    q = ortlab.quantize(m, cfg, dims=args.dims, feeds=_feeds(args.feeds, m))
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
            print(f"ortlab: the weights are in {target.parent / data.name}, beside the model; "
                  "keep them together", file=sys.stderr)  # fmt: skip
    info = q.variant
    if args.json:
        print(
            json.dumps(
                {
                    "variant": info.label,
                    "path": str(target),
                    "bytes": target.stat().st_size,
                    "steps": info.steps,
                    "calibration": info.calibration,
                    "synthetic_calibration": info.synthetic_calibration,
                },
                indent=2,
            )
        )
        return
    size, fp32 = fmt_bytes(target.stat().st_size), fmt_bytes(m.path.stat().st_size)
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
    print(json.dumps(info.to_dict(), indent=2) if as_json else providers_text(info))


def _whatif(args: argparse.Namespace) -> None:

    m = _model(args.model)
    targets = args.targets if isinstance(args.targets, list) else _targets_arg(args.targets)
    w = ortlab.whatif(
        m, targets, dims=args.dims, feeds=_feeds(args.feeds, m),
        qnn_options=dict(args.qnn_option), progress=_progress(args),
    )  # fmt: skip
    print(w.to_json(indent=2) if args.json else w.to_text())


_HANDLERS: dict[str, Callable[[argparse.Namespace], None]] = {
    "inspect": _inspect, "bench": _bench, "profile": _profile, "cost": _cost,
    "roofline": _roofline, "sweep": _sweep, "throughput": _throughput,
    "place": _place, "version-diff": _version_diff,
    "optimize": _optimize, "quantize": _quantize, "examples": _examples, "cache": _cache,
    "providers": _providers_cmd, "doctor": _doctor, "report": _report, "whatif": _whatif,
}  # fmt: skip


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
            _HANDLERS[args.command](args)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
