"""A result's record, gathered when a public verb returns (:func:`recorded`): the machine and
its caches, the onnxruntime package and the settings the verb ran with, the model file's
identity, the inputs given. Read from this process (the machine, the environment) and the
worker (the EPs onnxruntime has: ``ortlab.providers()``, measured once per process); the model's
sha256 once per file version (path, size, mtime)."""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import hashlib
import inspect
import os
import platform
import re
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from ortlab.core import telemetry
from ortlab.core.config import SessionConfig
from ortlab.core.errors import OrtlabError
from ortlab.core.machine import cache_levels, cpu_flags, cpu_model, logical_cpus, physical_cores
from ortlab.core.model import Model
from ortlab.core.record import ModelIdentity, Provenance, RuntimeFacts, SystemFacts
from ortlab.core.result import Result
from ortlab.core.version import __version__

if TYPE_CHECKING:
    import onnx

__all__ = [
    "RUNTIME_ENV",
    "model_identity",
    "path_identity",
    "provenance",
    "recorded",
    "runtime_facts",
    "runtime_version",
    "system_facts",
]

P = ParamSpec("P")
R = TypeVar("R")

RUNTIME_ENV = re.compile(
    r"^(OMP_|KMP_|GOMP_|MKL_|OPENBLAS_|ORT_|ONNXRUNTIME_|CUDA_VISIBLE_DEVICES$|"
    r"CUDA_LAUNCH_BLOCKING$|TF_ENABLE_ONEDNN|DNNL_|ONEDNN_|OV_|OPENVINO_|QNN_|ADSP_LIBRARY_PATH$)"
)
"""The environment variables that change how onnxruntime, its thread pools or an EP behave."""


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def _container() -> str:
    if Path("/.dockerenv").exists():
        return "docker"
    if Path("/run/.containerenv").exists():
        return "podman"
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    cgroup = _read("/proc/1/cgroup")
    for name in ("kubepods", "docker", "containerd", "lxc", "libpod"):
        if name in cgroup:
            return name
    return ""


def _virtual_machine() -> str:
    vendor = _read("/sys/class/dmi/id/sys_vendor")
    product = _read("/sys/class/dmi/id/product_name")
    for known in ("QEMU", "KVM", "VMware", "VirtualBox", "Xen", "Microsoft Corporation"):
        if known.lower() in f"{vendor} {product}".lower():
            return f"{vendor} {product}".strip()
    for cloud in ("Amazon EC2", "Google Compute Engine", "Alibaba Cloud", "OpenStack"):
        if cloud.lower() in f"{vendor} {product}".lower():
            return cloud
    return "hypervisor (cpuinfo)" if "hypervisor" in cpu_flags() else ""


@functools.cache
def system_facts() -> SystemFacts:
    """This machine (read once per process)."""
    import psutil

    return SystemFacts(
        hostname=socket.gethostname(),
        cpu=cpu_model(),
        node=os.environ.get("ORTLAB_NODE", ""),
        logical_cores=logical_cpus(),
        physical_cores=physical_cores(),
        caches={c.name: c.size for c in cache_levels()},
        memory_bytes=int(psutil.virtual_memory().total),
        os=platform.platform(),
        python=platform.python_version(),
        container=_container(),
        virtual_machine=_virtual_machine(),
    )


@functools.cache
def _package() -> tuple[str, str]:
    """The distribution that installed the ``onnxruntime`` module, and its version."""
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    names = packages_distributions().get("onnxruntime", [])
    for name in names:
        try:
            return name, version(name)
        except PackageNotFoundError:
            continue
    return "onnxruntime", ""


def runtime_version() -> str:
    """The version of the onnxruntime serving this process's tasks (another environment's
    under ``ortlab run --onnxruntime``), else of the package installed here."""
    from ortlab.engine.providers import providers

    with contextlib.suppress(OrtlabError):
        return providers().ort_version or _package()[1]
    return _package()[1]


def runtime_facts(config: SessionConfig) -> RuntimeFacts:
    """The runtime as ``config`` runs it here (in another environment's worker, under
    ``ortlab run --onnxruntime``: that onnxruntime, installed from PyPI as 'onnxruntime')."""
    from ortlab.engine.providers import providers
    from ortlab.engine.worker import serving

    package, version = ("onnxruntime", "") if serving() else _package()
    try:  # the worker's facts (measured once per process); a record never fails its verb
        found = providers()
        version, in_build = found.ort_version or version, list(found.in_build)
        plugins = {p.name: p.version for p in found.plugins if not p.error}
    except OrtlabError:
        in_build, plugins = [], {}
    said = telemetry.state()
    return RuntimeFacts(
        package=package,
        version=version,
        providers_in_build=in_build,
        plugin_eps=plugins,
        environment={k: v for k, v in sorted(os.environ.items()) if RUNTIME_ENV.match(k)},
        providers=list(config.providers or ()),
        intra_op_threads=config.intra_op_threads,
        inter_op_threads=config.inter_op_threads,
        spinning=config.spinning(),
        config_entries=dict(config.config_entries),
        telemetry=f"ortlab's processes: {said.ortlab_processes}; this process: {said.this_process}",
    )


@functools.lru_cache(maxsize=64)
def _digest(files: tuple[tuple[str, int, float], ...]) -> tuple[str, int]:
    """sha256 over the files in order, and their bytes (keyed by path, size and mtime: a
    file rewritten is hashed again)."""
    digest, total = hashlib.sha256(), 0
    for path, _, _ in files:
        with Path(path).open("rb") as stream:
            while block := stream.read(1 << 20):
                digest.update(block)
                total += len(block)
    return digest.hexdigest(), total


def path_identity(path: Path, name: str) -> ModelIdentity:
    """The identity of the model file at ``path`` read without its weights (a verb given a
    path has parsed it already: no second full load to describe it)."""
    import onnx

    return model_identity(
        None, path=path, name=name, proto=onnx.load(str(path), load_external_data=False)
    )


def model_identity(
    m: Model | None,
    *,
    path: Path | None = None,
    name: str = "",
    proto: onnx.ModelProto | None = None,
) -> ModelIdentity:
    """``m``'s file (or ``path``'s, with its ``proto``): sha256 over it and its external data
    (by name), producer, opsets."""
    from ortlab.core.externaldata import data_files

    if m is not None:
        path, name, proto = m.path, m.name, m.proto
    assert path is not None and proto is not None
    paths = [path, *sorted(data_files(proto, path.parent))]
    key = tuple((str(p), (st := p.stat()).st_size, st.st_mtime) for p in paths)
    sha, size = _digest(key)
    return ModelIdentity(
        name=name,
        file=path.name,
        sha256=sha,
        size_bytes=size,
        producer=f"{proto.producer_name} {proto.producer_version}".strip(),
        opsets={o.domain or "ai.onnx": int(o.version) for o in proto.opset_import},
    )


def _inputs(arguments: Mapping[str, object]) -> dict[str, str]:
    feeds, dims = arguments.get("feeds"), arguments.get("dims")
    if isinstance(feeds, Mapping):
        return {
            str(k): f"{getattr(v, 'dtype', type(v).__name__)}{list(getattr(v, 'shape', ()))}"
            for k, v in feeds.items()
        }
    if isinstance(dims, Mapping):
        return {str(k): str(v) for k, v in dims.items()}
    return {}


def provenance(
    verb: str, model: Model | ModelIdentity | None, config: SessionConfig, **given: object
) -> Provenance:
    """The record of ``verb`` on ``model`` with ``config`` now (``given``: its feeds or dims)."""
    return Provenance(
        measured_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        verb=verb,
        system=system_facts(),
        runtime=runtime_facts(config),
        model=model_identity(model) if isinstance(model, Model) else model,
        inputs=_inputs(given),
        ortlab_version=__version__,
    )


def recorded(verb: Callable[P, R]) -> Callable[P, R]:
    """``verb`` returning its result with its record attached (:meth:`Result.provenance`):
    the model and config from its own arguments (or the result's config)."""
    signature = inspect.signature(verb)

    @functools.wraps(verb)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        out = verb(*args, **kwargs)
        if isinstance(out, Result) and out.provenance is None:
            bound = signature.bind_partial(*args, **kwargs).arguments
            given = bound.get("model")
            m: Model | ModelIdentity | None = given if isinstance(given, Model) else None
            if isinstance(given, str | os.PathLike) and Path(given).is_file():
                try:
                    m = path_identity(Path(given), Path(given).stem)
                except Exception:  # noqa: BLE001 - a record never fails the verb it describes
                    m = None
            config = getattr(out, "config", None)
            if not isinstance(config, SessionConfig):
                config = SessionConfig()
            reach = bound.get("reach")  # dims travel in **reach for most verbs
            every = {**bound, **(reach if isinstance(reach, dict) else {})}
            given_inputs = {k: every[k] for k in ("feeds", "dims") if every.get(k) is not None}
            out.attach(provenance(verb.__name__, m, config, **given_inputs))
        return out

    return call
