"""The command line's argument types and the arguments every session verb shares (model,
providers, level, threads, dims or feeds), and turning them into a model, a config and feeds."""

from __future__ import annotations

import argparse
import re
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ortlab
from ortlab.analysis.placement.whatifresult import DEFAULT_TARGETS
from ortlab.core.config import LEVELS, canonical_level, canonical_provider
from ortlab.core.errors import FeedError, OrtlabError
from ortlab.core.feedcheck import validate_feeds
from ortlab.core.grammar import parse_dims
from ortlab.core.runtime import TIMED_SPIN_US
from ortlab.engine import examples

if TYPE_CHECKING:
    import numpy as np

    from ortlab.core.inputs import Feeds
    from ortlab.core.model import Model
    from ortlab.engine.calls import Reach


def load_model(spec: str, part: str | None = None) -> Model:
    """The model a verb's first argument names: a file, a folder (``part``: another of its
    models than the text decoder) or a bundled example."""
    if part is not None:
        folder = Path(spec) if Path(spec).exists() else examples.folder_of(spec)
        return ortlab.load(folder, part=part)
    if Path(spec).exists() or spec not in examples.names():
        return ortlab.load(spec)
    return examples.load(spec)


# ---------------------------------------------------------------------- argument types
# Parsed by argparse itself, so a bad value exits 2 with the usage line, like any other
# argument error ("ortlab bench: error: argument --dims: …").


def _dims_arg(text: str) -> dict[str, int]:
    """``--dims batch=1,sequence=128``: the one grammar (``core.grammar.parse_dims``)."""
    try:
        return parse_dims(text)
    except FeedError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def targets_arg(text: str) -> list[str]:
    from ortlab.core.eps import PROVIDER_ALIASES

    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in PROVIDER_ALIASES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown target {', '.join(unknown) or '(none)'}: use {', '.join(DEFAULT_TARGETS)} "
            "or an EP alias (cpu, cuda, trt, dml…)"
        )
    return names


def option_arg(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"expects key=value (e.g. htp_arch=73), got {text!r}")
    return key.strip(), value.strip()


def providers_arg(text: str) -> list[str] | str:

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


def level_arg(text: str) -> str:

    try:
        return canonical_level(text)
    except OrtlabError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def levels_arg(text: str) -> list[str]:
    levels = [level_arg(lv) for lv in text.split(",") if lv.strip()]
    if not levels:
        raise argparse.ArgumentTypeError("give at least one level, e.g. disabled,all")
    return levels


def int_arg(low: int) -> Callable[[str], int]:
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


def seconds_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects seconds, got {text!r}") from None
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expects seconds > 0, got {text}")
    return value


def levels_int_arg(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects integers like 1,2,4, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expects positive integers like 1,2,4, got {text!r}")
    return sorted(set(values))


def session_config(args: argparse.Namespace) -> ortlab.SessionConfig:

    return ortlab.SessionConfig(
        providers=args.providers,
        level=args.level,
        intra_op_threads=args.threads,
        inter_op_threads=args.inter_threads,
        execution_mode=args.mode,
        allow_spinning=None if args.spinning in (None, "bounded") else args.spinning == "on",
        spin_duration_us=TIMED_SPIN_US if args.spinning == "bounded" else None,
        io_binding=args.io_binding,
        fallback="warn",
    )


def load_feeds(path: str | None, m: Model) -> Feeds | None:
    """The arrays of ``--feeds file.npz`` (one per input, by name), validated against ``m``."""
    if path is None:
        return None
    arrays = read_npz(path, m)
    example = ", ".join(f"{t.name!r}: ..." for t in m.inputs)
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


def read_npz(path: str, m: Model) -> dict[str, np.ndarray]:
    """The arrays of the .npz at ``path`` by name, not yet checked against ``m`` (whose inputs
    a refusal names)."""
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
    return arrays


# ---------------------------------------------------------------------- the parser


def add_shapes_args(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument("--dims", type=_dims_arg, help="symbolic dims, e.g. batch=1,sequence=128")
    group.add_argument(
        "--feeds",
        metavar="FILE.npz",
        help="the inputs to run with: an .npz with one array per input name "
        "(sets every shape, unnamed dims and state inputs included)",
    )


MODEL_HELP = (
    "a .onnx file, a model folder (onnxruntime-genai's or optimum's: its text decoder; --part "
    "picks another of its models) or a bundled example name"
)


def add_session_args(
    p: argparse.ArgumentParser, *, model: bool = True, threads: bool = True
) -> None:
    """The session's flags every verb takes; ``model``: the model as the first argument, and
    ``threads``: one ``--threads`` (llm-bench names its models with ``-m`` too and takes a
    list of thread counts, as llama-bench does)."""
    if model:
        p.add_argument("model", help=MODEL_HELP)
    p.add_argument(
        "--part",
        default=None,
        help="in a folder of several models, the one to use: encoder, vision, speech, "
        "embedding (or its file name); the folder's summary lists them",
    )
    p.add_argument(
        "--providers",
        type=providers_arg,
        default=["cpu"],
        help="comma-separated EPs (cpu,cuda,trt,openvino…) or 'auto'",
    )
    p.add_argument("--level", type=level_arg, default="all", help=" | ".join(LEVELS))
    if threads:
        p.add_argument(
            "--threads", type=int_arg(0), default=0, help="intra-op threads (0 = ORT default)"
        )
    p.add_argument("--inter-threads", type=int_arg(0), default=0, help="inter-op threads")
    p.add_argument("--mode", default="sequential", choices=["sequential", "parallel"])
    p.add_argument(
        "--spinning",
        choices=["on", "off", "bounded"],
        default=None,
        help=f"intra-op spinning ('bounded': at most {TIMED_SPIN_US} µs, onnxruntime 1.31.1+)",
    )
    p.add_argument("--io-binding", action="store_true", help="run through IOBinding")
    add_shapes_args(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def wants_progress(args: argparse.Namespace) -> bool:
    return not args.json and sys.stderr.isatty()


def verb_args(
    args: argparse.Namespace,
) -> tuple[Model, ortlab.SessionConfig, Feeds | None, Reach]:
    """What every session verb takes, from a command's arguments: the model, its config,
    the feeds of ``--feeds`` (or None: made at ``--dims``) and how the verb is reached (the
    dims; a progress bar only on a terminal, never beside ``--json``)."""
    m = load_model(args.model, getattr(args, "part", None))
    reach: Reach = {"dims": args.dims, "progress": wants_progress(args)}
    return m, session_config(args), load_feeds(args.feeds, m), reach


def add_node_data_arg(p: argparse.ArgumentParser, figure: str) -> None:
    """``--model-explorer OUT.json``: the verb's per-node ``figure`` as Model Explorer's node
    data (:func:`ortlab.model_explorer_data`)."""
    p.add_argument(
        "--model-explorer",
        metavar="OUT.json",
        default=None,
        help=f"also write each node's {figure} as Model Explorer node data (open it beside "
        "the model: model-explorer MODEL --node_data_paths=OUT.json)",
    )


def write_node_data(args: argparse.Namespace, m: ortlab.Model, figure: str, **results: Any) -> None:
    """Write ``--model-explorer``'s file, if asked, and say where (stderr under ``--json``)."""
    if getattr(args, "model_explorer", None):
        out = ortlab.model_explorer_data(m, args.model_explorer, figure, **results)
        print(out, file=sys.stderr if args.json else sys.stdout)
