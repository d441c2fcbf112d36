"""The ``ortlab`` command: inspect, bench, profile, place, optimize, quantize, doctor, report,
providers, examples, cache.

Human tables by default, ``--json`` for the result's ``to_json()``. Errors print ortlab's message
(what failed, what is available, how to fix) and exit with status 2; no tracebacks for user errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _model(spec: str) -> Any:
    import ortlab
    from ortlab import examples

    if Path(spec).exists() or spec not in examples.names():
        return ortlab.load(spec)
    return examples.load(spec)


def _dims(text: str | None) -> dict[str, int] | None:
    if not text:
        return None
    out = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or not value.strip().isdigit():
            raise SystemExit(f"ortlab: error: --dims expects name=int[,name=int], got {part!r}")
        out[name.strip()] = int(value)
    return out


def _config(args: argparse.Namespace) -> Any:
    from ortlab import SessionConfig

    providers = "auto" if args.providers == "auto" else [p for p in args.providers.split(",") if p]
    return SessionConfig(
        providers=providers,
        level=args.level,
        intra_op_threads=args.threads,
        inter_op_threads=args.inter_threads,
        execution_mode=args.mode,
        allow_spinning=None if args.spinning is None else args.spinning == "on",
        io_binding=args.io_binding,
        fallback="warn",
    )


def _session_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="path to a .onnx file, or a bundled example name")
    p.add_argument(
        "--providers", default="cpu", help="comma-separated EPs (cpu,cuda,trt,openvino…) or 'auto'"
    )
    p.add_argument("--level", default="all", help="disabled | basic | extended | layout | all")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0 = ORT default)")
    p.add_argument("--inter-threads", type=int, default=0, help="inter-op threads")
    p.add_argument("--mode", default="sequential", choices=["sequential", "parallel"])
    p.add_argument("--spinning", choices=["on", "off"], default=None, help="intra-op spinning")
    p.add_argument("--io-binding", action="store_true", help="run through IOBinding")
    p.add_argument("--dims", help="symbolic dims, e.g. batch=1,sequence=128")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _doctor_parsers(sub: Any) -> None:
    p = sub.add_parser("doctor", help="find what slows the session down; every fix measured")
    _session_args(p)
    p.add_argument("--budget", type=float, default=120, help="seconds to spend measuring")
    p.add_argument("--no-quantize", action="store_true", help="do not try int8 variants")
    p.add_argument("-o", "--output", help="also write the JSON result to this file")
    p = sub.add_parser("report", help="self-contained HTML report (runs the doctor first)")
    _session_args(p)
    p.add_argument("-o", "--output", required=True, help="the .html file to write")
    p.add_argument("--budget", type=float, default=60, help="the doctor's time budget (s)")
    p.add_argument("--no-doctor", action="store_true", help="profile and levels only")


def _parser() -> argparse.ArgumentParser:
    from ortlab import __version__

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
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    p = sub.add_parser("profile", help="per-node / per-op / per-EP time from ORT's profiler")
    _session_args(p)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--top", type=int, default=15, help="rows in the top-nodes table")
    p = sub.add_parser("place", help="where each node runs: partitions, boundaries, time per EP")
    _session_args(p)
    p.add_argument("--runs", type=int, default=5)
    p = sub.add_parser("optimize", help="what each optimization level changes, and its latency")
    _session_args(p)
    p.add_argument("--levels", default="disabled,basic,extended,layout,all")
    p.add_argument("--rounds", type=int, default=8, help="interleaved timing rounds")
    p.add_argument("--runs", type=int, default=10, help="runs per level per round")
    p.add_argument("--no-timing", action="store_true", help="only the graph diff")
    p = sub.add_parser("quantize", help="build a quantized or fp16 variant (written to -o)")
    p.add_argument("model")
    p.add_argument("--mode", default="static", choices=["static", "dynamic", "fp16"])
    p.add_argument("--format", default="qdq", choices=["qdq", "qoperator"])
    p.add_argument("--per-channel", action="store_true")
    p.add_argument("--method", default="minmax", choices=["minmax", "entropy", "percentile"])
    p.add_argument("--calibration", help="folder of .npy/.npz samples (default: synthetic)")
    p.add_argument("--samples", type=int, default=16, help="calibration samples to use")
    p.add_argument("-o", "--output", help="where to write the variant (never the input)")
    p.add_argument("--json", action="store_true")
    _doctor_parsers(sub)
    p = sub.add_parser("providers", help="EPs in this build, which really load, real devices")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("examples", help="list the bundled models")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("cache", help="show or empty ortlab's cache directory")
    p.add_argument("action", choices=["info", "clear"])
    return parser


def _progress(args: argparse.Namespace) -> bool:
    return not args.json and sys.stderr.isatty()


def _inspect(args: argparse.Namespace) -> None:
    m = _model(args.model)
    print(m.summary.to_json(indent=2) if args.json else m.summary.to_text())


def _bench(args: argparse.Namespace) -> None:
    import ortlab

    b = ortlab.benchmark(
        _model(args.model), _config(args), runs=args.runs, warmup=args.warmup,
        duration_s=args.duration, dims=_dims(args.dims), progress=_progress(args),
    )  # fmt: skip
    print(b.to_json(indent=2) if args.json else b.to_text())


def _profile(args: argparse.Namespace) -> None:
    import ortlab

    p = ortlab.profile(
        _model(args.model), _config(args), runs=args.runs, warmup=args.warmup,
        dims=_dims(args.dims), progress=_progress(args),
    )  # fmt: skip
    print(p.to_json() if args.json else p.to_text(top=args.top))


def _place(args: argparse.Namespace) -> None:
    import ortlab

    pl = ortlab.placement(
        _model(args.model), _config(args), runs=args.runs, dims=_dims(args.dims),
        progress=_progress(args),
    )  # fmt: skip
    print(pl.to_json(indent=2) if args.json else pl.to_text())


def _optimize(args: argparse.Namespace) -> None:
    import ortlab

    opt = ortlab.optimization_diff(
        _model(args.model), [lv for lv in args.levels.split(",") if lv], _config(args),
        rounds=args.rounds, runs=args.runs, dims=_dims(args.dims),
        measure=not args.no_timing, progress=_progress(args),
    )  # fmt: skip
    print(opt.to_json() if args.json else opt.to_text())


def _doctor(args: argparse.Namespace) -> None:
    import ortlab

    d = ortlab.doctor(_model(args.model), _config(args), dims=_dims(args.dims),
                      budget_s=args.budget, quantize=not args.no_quantize,
                      progress=_progress(args))  # fmt: skip
    if args.output:
        d.save(args.output)
    print(d.to_json(indent=2) if args.json else d.to_text())


def _report(args: argparse.Namespace) -> None:
    import ortlab

    m, cfg = _model(args.model), _config(args)
    d = None
    if not args.no_doctor:
        d = ortlab.doctor(m, cfg, dims=_dims(args.dims), budget_s=args.budget,
                          progress=_progress(args))  # fmt: skip
    out = ortlab.report(m, d, path=args.output, config=cfg, progress=_progress(args))
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB): open it in any browser")


def _examples(args: argparse.Namespace) -> None:
    import ortlab

    info = ortlab.examples.describe()
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        width = max(map(len, info))
        print("\n".join(f"{k:<{width}}  {v}" for k, v in info.items()))


def _cache(args: argparse.Namespace) -> None:
    from ortlab import cache
    from ortlab.render import fmt_bytes

    if args.action == "clear":
        print(f"Emptied {cache.cache_dir()}: freed {fmt_bytes(cache.clear())}")
    else:
        print(
            f"{cache.cache_dir()}: {fmt_bytes(cache.size_bytes())} of at most "
            f"{fmt_bytes(cache.max_bytes())} (ORTLAB_CACHE_MAX_BYTES); least recently used "
            "entries go first. `ortlab cache clear` empties it."
        )


def _run(args: argparse.Namespace) -> int:
    handlers = {
        "inspect": _inspect, "bench": _bench, "profile": _profile, "place": _place,
        "optimize": _optimize, "quantize": _quantize, "examples": _examples, "cache": _cache,
        "providers": _providers_cmd, "doctor": _doctor, "report": _report,
    }  # fmt: skip
    handlers[args.command](args)
    return 0


def _quantize(args: argparse.Namespace) -> None:
    import shutil

    import ortlab
    from ortlab.render import fmt_bytes, safe_text

    m = _model(args.model)
    cfg = ortlab.QuantConfig(
        mode=args.mode,
        format=args.format,
        per_channel=args.per_channel,
        method=args.method,
        calibration=args.calibration,
        calibration_size=args.samples,
    )
    q = ortlab.quantize(m, cfg)
    target = q.path
    if args.output:
        target = Path(args.output)
        if target.exists() and target.resolve() == m.path.resolve():
            raise ortlab.QuantizationError(
                f"-o {args.output} is the input model: ortlab never overwrites it. "
                "Pick another path."
            )
        shutil.copyfile(q.path, target)
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


def _providers_cmd(args: argparse.Namespace) -> None:
    _providers(args.json)


def _providers(as_json: bool) -> None:
    import onnxruntime as ort

    from ortlab.engine import call

    chosen, reasons = call("auto_providers", {}, desc="", context="", progress=False)
    devices = [d.__dict__ for d in ortlab_devices()]
    info = {
        "onnxruntime": ort.__version__,
        "in_build": list(ort.get_available_providers()),
        "loadable": chosen,
        "reasons": reasons,
        "devices": devices,
    }
    if as_json:
        print(json.dumps(info, indent=2))
        return
    from ortlab.render import safe_text

    print(f"onnxruntime {info['onnxruntime']}")
    print(f"in this build: {', '.join(info['in_build'])}")
    print(f"really load here: {', '.join(chosen)}")
    for r in reasons:
        print(f"  - {safe_text(r, 400)}")
    print(
        "devices: "
        + ", ".join(f"{d['ep_name']} on {d['device_type']} ({d['device_vendor']})" for d in devices)
    )


def ortlab_devices() -> list[Any]:
    from ortlab.runtime import devices

    return devices()


def main(argv: Sequence[str] | None = None) -> int:
    from ortlab.errors import OrtlabError

    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except OrtlabError as err:
        from ortlab.render import safe_text

        print(f"ortlab: error: {safe_text(err, 5000)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ortlab: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
