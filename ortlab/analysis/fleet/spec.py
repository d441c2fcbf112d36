"""A run spec: the models (files, folders, globs or bundled example names, each with its dims
or feeds), the verbs with their arguments and the configs, read from TOML (or JSON); each
(model, verb, config) is one item, one record (:func:`read_spec`, :data:`EXAMPLE`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import tomllib

from ortlab.core.errors import OptionError
from ortlab.core.grammar import VERSION

__all__ = ["EXAMPLE", "SPEC_VERBS", "Item", "ModelEntry", "Spec", "read_spec"]

SPEC_VERBS = (
    "benchmark",
    "profile",
    "placement",
    "cost",
    "roofline",
    "footprint",
    "throughput",
    "sweep",
    "soak",
    "generate",
    "llm_bench",
)
"""The verbs a spec may name: each measures one model under one config."""

EXAMPLE = """\
# An ortlab run spec: every (model, verb, config) below is one item and one record.
# ortlab run spec.toml -o records/      then      ortlab merge records/ [other-machine/ …]

# onnxruntime: the versions each item runs under, each in its own virtual environment built
# once from PyPI ("here": this process's own). With onnxruntime = ["1.31.1", "1.32.0"],
# ortlab merge records/ --by onnxruntime   ranks what the upgrade made slower.
onnxruntime = ["here"]

# models: a .onnx file, a model folder, a glob ("zoo/*.onnx") or a bundled example name;
# each may fix its dims (the model's names or a decoder's roles) or give feeds (an .npz)
[[models]]
model = "mlp"

[[models]]
model = "tiny_llama_int4"
dims = { prompt = 16, past = 0 }

# configs: a name, then SessionConfig's fields
[configs.all]
level = "all"

[configs.disabled]
level = "disabled"

# verbs: a name, then the verb's own arguments
[[verbs]]
verb = "benchmark"
runs = 30

[[verbs]]
verb = "profile"
runs = 10
"""
"""A worked spec over the bundled models (``ortlab run --example``): it runs as printed."""


@dataclass(frozen=True)
class ModelEntry:
    """One model of a spec: what names it, and its dims or feeds (an .npz path)."""

    model: str
    label: str
    dims: dict[str, int] = field(default_factory=dict)
    feeds: str = ""
    part: str = ""


@dataclass(frozen=True)
class Item:
    """One measurement: a model, a verb with its arguments, a named config."""

    model: ModelEntry
    verb: str
    args: dict[str, object]
    config_name: str
    config: dict[str, object]
    onnxruntime: str = ""
    """The onnxruntime version it runs under, in its own virtual environment (built once
    from PyPI, as ``version_diff`` does); '' for this process's own."""

    @property
    def key(self) -> str:
        """The item's name, as records and the merge name it: 'mlp · benchmark · all'."""
        return f"{self.model.label} · {self.verb} · {self.config_name}"

    @property
    def label(self) -> str:
        """The key and the onnxruntime version it runs under, where it names one."""
        return self.key + (f" · onnxruntime {self.onnxruntime}" if self.onnxruntime else "")

    @property
    def file_name(self) -> str:
        """The record's file: the label in characters safe on every file system."""
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.label.replace(" · ", "__")) + ".json"


@dataclass(frozen=True)
class Spec:
    """The items of a spec, in order: models outermost, then verbs, then configs, then the
    onnxruntime versions (one measurement's versions run back to back)."""

    items: list[Item]
    source: str = ""

    def under(self, versions: Sequence[str]) -> Spec:
        """The spec with each item run under each of ``versions`` (replacing the spec's own);
        '' or 'here' is this process's onnxruntime."""
        plain = list({i.key: replace(i, onnxruntime="") for i in self.items}.values())
        vs = [_version(v) for v in versions]
        return Spec([replace(i, onnxruntime=v) for i in plain for v in vs], self.source)


def _version(text: object) -> str:
    v = str(text).strip()
    if v in ("", "here"):
        return ""
    if not VERSION.match(v):
        raise OptionError(
            f"spec: onnxruntime {v!r} is no version: give one PyPI has, e.g. '1.31.1', or "
            "'here' for this process's own"
        )
    return v


def _models(entries: object, base: Path, names: set[str]) -> list[ModelEntry]:
    if not isinstance(entries, list) or not entries:
        raise OptionError(
            'spec: give [[models]] with model = "…" (a file, folder, glob or example)'
        )
    out: list[ModelEntry] = []
    for raw in entries:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("model"), str):
            raise OptionError(f'spec: each [[models]] needs model = "…"; got {raw!r}')
        spec = str(raw["model"])
        dims = {str(k): int(v) for k, v in dict(raw.get("dims", {})).items()}
        feeds, part = str(raw.get("feeds", "")), str(raw.get("part", ""))
        if any(c in spec for c in "*?["):
            root = Path("/") if Path(spec).is_absolute() else base
            found = sorted(str(p) for p in root.glob(spec.lstrip("/")))
            if not found:
                raise OptionError(f"spec: {spec!r} matches no file (from {base})")
            out += [ModelEntry(f, Path(f).stem, dims, feeds, part) for f in found]
            continue
        path = base / spec if not Path(spec).is_absolute() else Path(spec)
        target = str(path) if path.exists() else spec
        if not path.exists() and spec not in names:
            raise OptionError(
                f"spec: {spec!r} is no file, folder or bundled example (from {base}); bundled: "
                + ", ".join(sorted(names))
            )
        out.append(ModelEntry(target, Path(spec).stem or spec, dims, feeds, part))
    return out


def read_spec(source: str | Path, *, examples: set[str] | None = None) -> Spec:
    """The spec in ``source`` (a .toml or .json path; relative model paths are the spec's
    folder's). ``examples``: the bundled names a model may be."""
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise OptionError(f"spec: cannot read {path}: {err.strerror}") from err
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as err:
        raise OptionError(f"spec: {path} is not valid {path.suffix[1:] or 'TOML'}: {err}") from err
    models = _models(data.get("models"), path.parent, examples or set())
    configs = data.get("configs") or {"default": {}}
    if not isinstance(configs, Mapping):
        raise OptionError('spec: [configs.NAME] tables of SessionConfig fields, e.g. level = "all"')
    verbs = data.get("verbs")
    if not isinstance(verbs, list) or not verbs:
        raise OptionError(f"spec: give [[verbs]] with verb = one of {', '.join(SPEC_VERBS)}")
    versions = data.get("onnxruntime", [""])
    versions = [versions] if isinstance(versions, str) else versions
    if not isinstance(versions, list) or not versions:
        raise OptionError('spec: onnxruntime = ["1.31.1", "1.32.0"] (or "here": this one)')
    items = []
    for m in models:
        for raw in verbs:
            name = str(dict(raw).get("verb", ""))
            if name not in SPEC_VERBS:
                raise OptionError(f"spec: verb {name!r} is none of {', '.join(SPEC_VERBS)}")
            args = {k: v for k, v in dict(raw).items() if k != "verb"}
            for cname, cfg in configs.items():
                items += [Item(m, name, args, str(cname), dict(cfg), _version(v)) for v in versions]
    return Spec(items=items, source=str(path))
