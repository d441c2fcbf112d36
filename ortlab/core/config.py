"""SessionConfig: every session setting ortlab can vary, as one frozen, hashable value.

Names follow ORT's own words (GraphOptimizationLevel, intra_op_num_threads, execution providers),
with short case-insensitive aliases for providers (``cpu``, ``cuda``, ``trt``, ``openvino``…)
as Polygraphy has them. A config round-trips through JSON and turns into a plain-onnxruntime
Python snippet with :meth:`SessionConfig.snippet`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeAlias

from ortlab.core import display
from ortlab.core.eps import POLICIES, PROVIDER_ALIASES, alias, canonical_provider, split_device
from ortlab.core.errors import ProviderError, SessionConfigError

__all__ = [
    "LEVELS",
    "LEVEL_ORDER",
    "PROVIDER_ALIASES",
    "ConfigLike",
    "SessionConfig",
    "canonical_provider",
]

LEVELS: dict[str, str] = {  # the one home of the level order: every list of levels reads it
    "disabled": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}
LEVEL_ORDER = tuple(LEVELS)
"""The levels, lowest first (``LEVEL_ORDER.index`` compares two)."""
_LEVEL_ALIASES = {
    "disable": "disabled",
    "disable_all": "disabled",
    "none": "disabled",
    "ort_disable_all": "disabled",
    "ort_enable_basic": "basic",
    "ort_enable_extended": "extended",
    "ort_enable_layout": "layout",
    "ort_enable_all": "all",
    "0": "disabled",
    "1": "basic",
    "2": "extended",
    "3": "layout",
    "99": "all",
}


def canonical_level(level: str | int) -> str:
    key = str(level).strip().lower()
    key = _LEVEL_ALIASES.get(key, key)
    if key not in LEVELS:
        raise SessionConfigError(
            f"Unknown optimization level {level!r}. Use one of {', '.join(LEVELS)} "
            "(ORT's GraphOptimizationLevel: DISABLE_ALL, ENABLE_BASIC, ENABLE_EXTENDED, "
            "ENABLE_LAYOUT, ENABLE_ALL)."
        )
    return key


Options = tuple[tuple[str, str], ...]
OptionsLike: TypeAlias = Mapping[str, object] | Iterable[tuple[str, object]]
"""Options as a caller gives them: a mapping or (key, value) pairs; each value is written as
ORT reads it (``str(value)``, booleans as '1'/'0')."""


def _freeze_options(options: OptionsLike | None) -> Options:
    if not options:
        return ()
    items = options.items() if isinstance(options, Mapping) else options
    return tuple(sorted((str(k), _option_text(v)) for k, v in items))


def _option_text(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


@dataclass(frozen=True)
class SessionConfig:
    """How to build an ORT InferenceSession. Frozen and hashable; see :meth:`snippet`."""

    providers: tuple[str, ...] | str = ("CPUExecutionProvider",)
    """Execution providers in priority order (aliases accepted), or ``"auto"``."""
    provider_options: tuple[tuple[str, Options], ...] = ()
    """Per-provider options: ``{"cuda": {"device_id": 0}}`` in the constructor."""
    level: str = "all"
    """Graph optimization level: disabled, basic, extended, layout, all."""
    intra_op_threads: int = 0
    """Threads inside one operator; 0 lets ORT choose (one per physical core)."""
    inter_op_threads: int = 0
    """Threads across operators (parallel execution mode only); 0 lets ORT choose."""
    execution_mode: str = "sequential"
    """'sequential' or 'parallel' (ORT_PARALLEL runs independent branches concurrently)."""
    allow_spinning: bool | None = None
    """Intra-op threads spin while idle (ORT default: yes). False saves CPU for others."""
    spin_duration_us: int | None = None
    """Time-bounded spinning (onnxruntime 1.31.1+, ``session.intra_op.spin_duration_us``): an
    idle thread spins at most this many microseconds, then sleeps; None is the runtime's
    default (spinning counted in iterations), 0 no spinning. Ignored with spinning off."""
    enable_mem_pattern: bool = True
    enable_cpu_mem_arena: bool = True
    free_dimension_overrides: tuple[tuple[str, int], ...] = ()
    """Fix symbolic dims at session creation: ``{"batch": 1}``."""
    config_entries: Options = ()
    """Extra ``add_session_config_entry`` keys: ``{"session.disable_cpu_ep_fallback": "1"}``."""
    disabled_optimizers: tuple[str, ...] = ()
    """Graph transformers ORT must not apply (``QuickGeluFusion``, ``ConstantFolding``…),
    through ``optimization.disable_specified_optimizers``: one optimizer off at a time."""
    custom_op_libraries: tuple[str, ...] = ()
    """Shared libraries with custom ops, registered before the session is built."""
    io_binding: bool = False
    """Run through IOBinding with inputs bound once (measures compute without input copies)."""
    fallback: str = "warn"
    """When a requested EP does not load: 'warn' (default), 'error', or 'allow' silently."""
    policy: str | None = None
    """Let ORT choose EPs and devices by policy (``'prefer_npu'``, ``'max_performance'``…; see
    ``ortlab.core.eps.POLICIES``) instead of ``providers``: ORT's own automatic selection."""

    def __init__(
        self,
        providers: Iterable[str] | str = ("cpu",),
        *,
        provider_options: Mapping[str, OptionsLike]
        | Iterable[tuple[str, OptionsLike]]
        | None = None,
        level: str | int = "all",
        intra_op_threads: int = 0,
        inter_op_threads: int = 0,
        execution_mode: str = "sequential",
        allow_spinning: bool | None = None,
        spin_duration_us: int | None = None,
        enable_mem_pattern: bool = True,
        enable_cpu_mem_arena: bool = True,
        free_dimension_overrides: Mapping[str, int] | Iterable[tuple[str, int]] | None = None,
        config_entries: OptionsLike | None = None,
        disabled_optimizers: Iterable[str] | str = (),
        custom_op_libraries: Iterable[str] = (),
        io_binding: bool = False,
        fallback: str = "warn",
        policy: str | None = None,
    ) -> None:
        s = object.__setattr__
        if isinstance(providers, str):
            provs: tuple[str, ...] | str = (
                "auto" if providers.strip().lower() == "auto" else (canonical_provider(providers),)
            )
        else:
            provs = tuple(dict.fromkeys(canonical_provider(p) for p in providers))
            if not provs:
                raise ProviderError("providers is empty; give at least one, e.g. ['cpu'].")
        s(self, "providers", provs)
        opts: list[tuple[str, Options]] = []
        if provider_options:
            items = (
                provider_options.items()
                if isinstance(provider_options, Mapping)
                else provider_options
            )
            for name, values in items:
                full = canonical_provider(name)
                if provs != "auto" and full not in {split_device(p)[0] for p in provs}:
                    raise ProviderError(
                        f"provider_options given for {name!r}, which is not in providers "
                        f"{list(provs)}. Add it to providers or drop its options."
                    )
                opts.append((full, _freeze_options(values)))
        s(self, "provider_options", tuple(sorted(opts)))
        s(self, "level", canonical_level(level))
        for fname, value in (
            ("intra_op_threads", intra_op_threads),
            ("inter_op_threads", inter_op_threads),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise SessionConfigError(
                    f"{fname}={value!r}: give a thread count >= 0 (0 lets ORT choose)."
                )
            s(self, fname, value)
        mode = str(execution_mode).lower().removeprefix("ort_")
        if mode not in ("sequential", "parallel"):
            raise SessionConfigError(
                f"execution_mode={execution_mode!r}: use 'sequential' or 'parallel'."
            )
        s(self, "execution_mode", mode)
        s(self, "allow_spinning", allow_spinning)
        s(self, "spin_duration_us", _spin_us(spin_duration_us))
        s(self, "enable_mem_pattern", bool(enable_mem_pattern))
        s(self, "enable_cpu_mem_arena", bool(enable_cpu_mem_arena))
        overrides = (
            free_dimension_overrides.items()
            if isinstance(free_dimension_overrides, Mapping)
            else (free_dimension_overrides or ())
        )
        frozen_overrides = []
        for k, v in overrides:
            if not isinstance(v, int) or v < 1:
                raise SessionConfigError(
                    f"free_dimension_overrides[{k!r}]={v!r}: a symbolic dim is fixed to an "
                    "integer >= 1."
                )
            frozen_overrides.append((str(k), int(v)))
        s(self, "free_dimension_overrides", tuple(sorted(frozen_overrides)))
        s(self, "config_entries", _freeze_options(config_entries))
        s(self, "disabled_optimizers", _optimizer_names(disabled_optimizers))
        s(self, "custom_op_libraries", tuple(_library_path(p) for p in custom_op_libraries))
        s(self, "io_binding", bool(io_binding))
        if fallback not in ("warn", "error", "allow"):
            raise SessionConfigError(f"fallback={fallback!r}: use 'warn', 'error' or 'allow'.")
        s(self, "fallback", fallback)
        s(self, "policy", _policy(policy))

    # ------------------------------------------------------------------ derived views

    def options_for(self, provider: str) -> dict[str, str]:
        """Provider options for ``provider`` (``'ep:device'`` names share the EP's options)."""
        return dict(dict(self.provider_options).get(split_device(provider)[0], ()))

    def with_(self, **changes: object) -> SessionConfig:
        """A copy with some fields changed (aliases accepted, as in the constructor)."""
        current = self.to_dict()
        current.update(changes)
        return SessionConfig(**current)

    def label(self) -> str:
        """Short text for tables and legends: ``cpu · all · intra=2``."""
        provs = "auto" if self.providers == "auto" else "+".join(alias(p) for p in self.providers)
        if self.policy:
            provs = f"policy={self.policy}"
        parts = [provs, self.level]
        if self.intra_op_threads:
            parts.append(f"intra={self.intra_op_threads}")
        if self.inter_op_threads:
            parts.append(f"inter={self.inter_op_threads}")
        if self.execution_mode != "sequential":
            parts.append(self.execution_mode)
        if self.allow_spinning is not None or self.spin_duration_us is not None:
            parts.append(self.spinning(short=True))
        if self.io_binding:
            parts.append("iobinding")
        parts += [f"−{name}" for name in self.disabled_optimizers]
        return " · ".join(parts)

    def spinning(self, *, short: bool = False) -> str:
        """How idle intra-op threads wait, in words: 'spinning off', 'spinning at most 1000 µs
        (time-bounded)', 'spinning (the runtime's default)'; ``short`` for a label."""
        if self.allow_spinning is False or self.spin_duration_us == 0:
            return "no-spin" if short else "spinning off"
        if self.spin_duration_us is not None:
            us = self.spin_duration_us
            return f"spin ≤{us} µs" if short else f"spinning at most {us} µs (time-bounded)"
        if self.allow_spinning:
            return "spin" if short else "spinning on (counted in iterations)"
        return "spin" if short else "spinning: the runtime's default (counted in iterations)"

    def __repr__(self) -> str:
        return f"SessionConfig({self.label()})"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["providers"] = self.providers if self.providers == "auto" else list(self.providers)
        d["provider_options"] = {k: dict(v) for k, v in self.provider_options}
        d["free_dimension_overrides"] = dict(self.free_dimension_overrides)
        d["config_entries"] = dict(self.config_entries)
        d["custom_op_libraries"] = list(self.custom_op_libraries)
        d["disabled_optimizers"] = list(self.disabled_optimizers)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def graph_key(self) -> str:
        """The settings that decide the graph ORT optimizes to at a given level (EPs and their
        options, disabled transformers, config entries, fixed dims, custom ops), as JSON:
        threads, spinning, memory flags and IO binding change how it runs, not what it is, so
        files saved per graph are keyed by this and stored once (not once per thread count)."""
        d = self.to_dict()
        runtime = (
            "level",
            "intra_op_threads",
            "inter_op_threads",
            "execution_mode",
            "allow_spinning",
            "spin_duration_us",
            "enable_mem_pattern",
            "enable_cpu_mem_arena",
            "io_binding",
            "fallback",
        )
        return json.dumps({k: v for k, v in d.items() if k not in runtime}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | Mapping[str, object]) -> SessionConfig:
        data = json.loads(text) if isinstance(text, str) else dict(text)
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise SessionConfigError(
                f"Unknown SessionConfig fields {sorted(unknown)}; known: "
                f"{', '.join(cls.__dataclass_fields__)}."
            )
        return cls(**data)

    def snippet(self, model_path: str = "model.onnx", providers: list[str] | None = None) -> str:
        """Python that builds this session with plain onnxruntime (no ortlab); ``providers``:
        what ``auto`` chose in a run (its session report's ``requested``)."""
        return str(display.render(self, "snippet", model_path=model_path, providers=providers))


def _spin_us(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise SessionConfigError(
            f"spin_duration_us={value!r}: give microseconds >= 0 (0: no spinning; typical "
            "500-2000), or None for the runtime's default."
        )
    return value


def _optimizer_names(names: Iterable[str] | str) -> tuple[str, ...]:
    listed = [names] if isinstance(names, str) else list(names)
    for name in listed:
        if not isinstance(name, str) or not name.isidentifier():
            raise SessionConfigError(
                f"disabled_optimizers: {name!r} is not a transformer name; give ORT's names, "
                "e.g. ['QuickGeluFusion'] (ortlab.ablate_optimizers(model) lists those that fire)."
            )
    return tuple(sorted(set(listed)))


def _policy(policy: str | None) -> str | None:
    if policy is None:
        return None
    if str(policy).lower() not in POLICIES:
        raise SessionConfigError(
            f"policy={policy!r}: use one of {', '.join(POLICIES)} (ORT's "
            "OrtExecutionProviderDevicePolicy), or None to use providers."
        )
    return str(policy).lower()


def _library_path(path: str | os.PathLike[str]) -> str:
    """A relative library path made absolute (ORT's tools run in a private cwd); a bare name
    such as ``libmyops.so`` stays, for the dynamic loader's search path."""
    text = str(path)
    if os.sep in text or (os.altsep and os.altsep in text):
        return str(Path(text).absolute())
    return text


ConfigLike: TypeAlias = SessionConfig | Mapping[str, Any]
"""What every verb takes as a config: a :class:`SessionConfig`, or a mapping of its field names
to values (``{"level": "basic", "intra_op_threads": 2}``). The mapping's values are Any to the
type checker on purpose, said here once: each field has its own type, checked (with a clear
``SessionConfigError``) when the mapping becomes a SessionConfig."""
