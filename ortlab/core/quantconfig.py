"""How to build a quantized or fp16 variant: one frozen record the user writes, the worker's
quantize task reads, the cache keys and a variant carries (``Model.variant.config``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from ortlab.core.errors import QuantizationError

_CHOICES = {
    "mode": ("dynamic", "static", "fp16", "int4"),
    "format": ("qdq", "qoperator"),
    "method": ("minmax", "entropy", "percentile"),
    "activation_type": ("QUInt8", "QInt8"),
    "weight_type": ("QUInt8", "QInt8"),
}
_LISTS = ("op_types", "op_block_list", "nodes_to_exclude", "promote_16bit")


@dataclass(frozen=True)
class QuantConfig:
    """How to build a variant. ``calibration`` (data) does not take part in equality, in the
    settings the cache is keyed by, or in what the worker is sent."""

    mode: str = "static"
    """'dynamic', 'static', 'fp16' or 'int4' (weight-only MatMulNBits for MatMul weights:
    ORT's ``matmul_nbits_quantizer``; activations stay float)."""
    format: str = "qdq"
    """Static only: 'qdq' (QuantizeLinear/DequantizeLinear pairs) or 'qoperator' (QLinear*)."""
    per_channel: bool = False
    activation_type: str = "QUInt8"
    """Static only: QUInt8 (ORT's default for CPU) or QInt8."""
    weight_type: str = "QInt8"
    method: str = "minmax"
    """Static calibration: 'minmax', 'entropy' or 'percentile'."""
    op_types: tuple[str, ...] = ()
    """Op types to quantize (empty: ORT's default set)."""
    preprocess: bool = True
    keep_io_types: bool = True
    """fp16 only: keep float32 inputs/outputs."""
    op_block_list: tuple[str, ...] = ()
    """fp16 only: op types left in float32."""
    calibration_size: int = 32
    block_size: int = 32
    """int4 only: weights per quantization block along K (16, 32, 64, 128…)."""
    accuracy_level: int | None = None
    """int4 only: MatMulNBits' compute type (None: ORT's default; 4: int8 activations, the
    fastest on x86 with AVX-512 VNNI / AVX2)."""
    symmetric: bool = True
    """int4 only: symmetric blocks (no zero points)."""
    nodes_to_exclude: tuple[str, ...] = ()
    """Nodes left in float (ORT's ``nodes_to_exclude``): the worst ones of
    ``quantization_error(...).fix()``."""
    promote_16bit: tuple[str, ...] = ()
    """Static QDQ only: tensors quantized to 16 bits instead of 8 (ORT's
    ``TensorQuantOverrides``, with its contrib Q/DQ ops)."""
    calibration: object = field(default=None, compare=False, hash=False, repr=False)
    """Calibration data (see :func:`ortlab.calibration_data`); None synthesizes it."""

    def __post_init__(self) -> None:
        for name, allowed in _CHOICES.items():
            value = getattr(self, name)
            if value not in allowed:
                raise QuantizationError(
                    f"QuantConfig.{name}={value!r}: use one of {', '.join(allowed)}."
                )
        for name in _LISTS:
            value = getattr(self, name)
            if isinstance(value, str):
                raise QuantizationError(
                    f"QuantConfig.{name}={value!r}: give a list of names, e.g. ({value!r},)."
                )
            object.__setattr__(self, name, tuple(value))

    @classmethod
    def of(cls, base: QuantConfig | None, options: dict[str, object]) -> QuantConfig:
        """``base`` (or the defaults) with ``options`` (keywords named like the fields, as
        ``ortlab.quantize(m, mode="dynamic")`` takes them); an unknown name is refused with
        the names there are."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise QuantizationError(
                f"QuantConfig has no setting {', '.join(map(repr, unknown))}: its settings are "
                f"{', '.join(names)}."
            )
        given: dict[str, Any] = dict(options)  # each checked by __post_init__ where it matters
        return replace(base if base is not None else cls(), **given)

    def label(self) -> str:
        if self.mode == "fp16":
            return "fp16"
        if self.mode == "int4":
            level = f" acc{self.accuracy_level}" if self.accuracy_level is not None else ""
            return f"int4 weight-only b{self.block_size}{level}" + (
                "" if self.symmetric else " asym"
            )
        if self.mode == "dynamic":
            base = "dynamic int8" + (" per-channel" if self.per_channel else "")
        else:
            base = f"static {self.format.upper()} {self.method}" + (
                " per-channel" if self.per_channel else ""
            )
        if self.nodes_to_exclude:
            base += f" · {len(self.nodes_to_exclude)} nodes float"
        if self.promote_16bit:
            base += f" · {len(self.promote_16bit)} tensors 16-bit"
        return base

    def settings(self) -> dict[str, object]:
        """The settings as JSON (lists for tuples; no calibration data, nor its size, which
        the calibration's own description carries): what the cache is keyed by and a record
        stores. :meth:`from_settings` reads them back."""
        out: dict[str, object] = {}
        for f in fields(self):
            if f.name not in ("calibration", "calibration_size"):
                value = getattr(self, f.name)
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_settings(cls, settings: dict[str, object]) -> QuantConfig:
        """The config :meth:`settings` came from (without its calibration data); names it does
        not know (a newer ortlab's) are left out."""
        names = {f.name for f in fields(cls)} - {"calibration"}
        known: dict[str, Any] = {k: v for k, v in settings.items() if k in names}
        return replace(cls(), **known)  # each checked by __post_init__ where it matters

    def without_data(self) -> QuantConfig:
        """This config with no calibration data: what the worker is sent (the samples go
        beside it, already drawn)."""
        return replace(self, calibration=None)
