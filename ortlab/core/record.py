"""What a result's record says of where it was measured (issue 63): the machine, the runtime
and its settings, the model file, the inputs — the facts a comparison across machines, models
and onnxruntime versions needs beside the figures. Plain data, written into a result's JSON
(:meth:`ortlab.core.result.Result.to_json`, schema 2, ``docs/records.md``) and read back
with it; gathered by :mod:`ortlab.analysis.provenance` when a verb returns."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ModelIdentity", "Provenance", "RuntimeFacts", "SystemFacts"]


@dataclass(frozen=True)
class SystemFacts:
    """The machine: its CPU, cores, caches, memory and operating system, and whether it is a
    container or a virtual machine (a record from one is not a bare-metal figure)."""

    hostname: str
    cpu: str
    logical_cores: int
    physical_cores: int
    caches: dict[str, int] = field(default_factory=dict)
    """Cache level -> bytes (per core for L1/L2, shared for the last level), as Linux lists."""
    memory_bytes: int = 0
    os: str = ""
    python: str = ""
    container: str = ""
    """'docker', 'podman', 'kubernetes', 'lxc' … or '' (none found)."""
    virtual_machine: str = ""
    """The hypervisor or cloud the firmware names ('KVM', 'Amazon EC2' …) or '' (none found)."""
    node: str = ""
    """The cluster node it ran on (``ortlab run --ray``: its ``ortlab-node-NAME``), '' when
    run directly: two nodes on one host are two columns of a merge."""


@dataclass(frozen=True)
class RuntimeFacts:
    """The runtime and its settings: the onnxruntime package and version, its EPs (in the
    build, and plugin EPs with their versions), the environment variables that change its
    behaviour, the session's threads, spinning and config entries, and the telemetry state."""

    package: str
    version: str
    providers_in_build: list[str] = field(default_factory=list)
    plugin_eps: dict[str, str] = field(default_factory=dict)
    """A plugin EP's name -> its package's version."""
    environment: dict[str, str] = field(default_factory=dict)
    """OMP_*, KMP_*, MKL_*, OPENBLAS_*, ORT_*, CUDA_VISIBLE_DEVICES… as set in this process."""
    providers: list[str] = field(default_factory=list)
    """The providers the verb's config asked for."""
    intra_op_threads: int = 0
    inter_op_threads: int = 0
    spinning: str = ""
    config_entries: dict[str, str] = field(default_factory=dict)
    """Session config entries (precision hints among them, e.g. fast-math GEMM)."""
    telemetry: str = ""


@dataclass(frozen=True)
class ModelIdentity:
    """The model file measured: its name, a sha256 over the file and its external data (in
    name order), their size, the producer and the opsets it imports."""

    name: str
    file: str
    """The file's name (not its folder: a record travels without the user's paths)."""
    sha256: str
    size_bytes: int
    producer: str = ""
    opsets: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Provenance:
    """One measurement's record beside its result: when, on what, with what."""

    measured_at: str
    """UTC, ISO 8601, when the verb returned."""
    verb: str
    system: SystemFacts
    runtime: RuntimeFacts
    model: ModelIdentity | None = None
    inputs: dict[str, str] = field(default_factory=dict)
    """What the verb ran on: the feeds' names and dtype[shape], or the dims given; empty
    when ortlab chose them (the result's own notes say how)."""
    ortlab_version: str = ""
