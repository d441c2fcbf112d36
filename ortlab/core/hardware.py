"""The machine's physical peaks as its own description gives them — a **prediction** from the
CPU's flags, core count and clock and the memory's DMI records, never a measurement. A
roofline shows it beside each measured ceiling, so a reader sees how far ORT's best kernel is
from what the silicon could do, and where the description is wrong (a virtual machine reports
its nominal clock: a GEMM measured above the "physical" peak says the cores ran faster).

- FLOP/s: physical cores * FMA units * SIMD lanes * 2 (a fused multiply-add is two FLOPs) *
  clock. The lanes come from the widest vector flag (AVX-512: 16 fp32, AVX/AVX2: 8, SSE: 4);
  the FMA units per core are not in any flag: two is assumed (every x86 server core since
  Haswell and Zen 2), which the formula says. The clock is the highest the kernel reports
  (cpufreq's maximum, else ``cpu MHz``).
- DRAM bytes/s: the populated memory devices of SMBIOS type 17 (DMI), each its configured
  speed (MT/s) * its data width — one device per channel, an upper bound; only where
  ``/sys/firmware/dmi/tables/DMI`` is readable (root on bare metal; rarely in a VM).
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from pathlib import Path

from ortlab.core.machine import logical_cpus

__all__ = ["PhysicalPeak", "dimm_bandwidth", "physical_peaks"]

FMA_UNITS = 2
"""FMA units per core assumed (no CPU flag says it)."""
_LANES = (("avx512f", 16), ("avx2", 8), ("avx", 8), ("sse2", 4))
"""fp32 lanes of the widest vector unit, by flag."""
DMI_TABLE = Path("/sys/firmware/dmi/tables/DMI")


@dataclass(frozen=True)
class PhysicalPeak:
    """One peak from the machine's description: ``dtype`` 'fp32' (FLOP/s) or 'memory'
    (bytes/s), its value (NaN when the description lacks what it needs), the formula with
    the numbers put in, and where each came from."""

    dtype: str
    value: float
    formula: str
    source: str


def physical_peaks(
    cpuinfo: str | None = None, max_khz: int | None = None, dmi: bytes | None = None
) -> list[PhysicalPeak]:
    """fp32 FLOP/s and DRAM bytes/s from this machine's description (or the texts given, for
    tests): see the module's docstring. This machine's are read once per process."""
    if cpuinfo is None and max_khz is None and dmi is None:
        return list(_this_machine())
    text = cpuinfo if cpuinfo is not None else _read_text("/proc/cpuinfo")
    return [_fp32(text, max_khz if max_khz is not None else _max_khz()), _dram(dmi)]


@functools.cache
def _this_machine() -> tuple[PhysicalPeak, ...]:
    return (_fp32(_read_text("/proc/cpuinfo"), _max_khz()), _dram(None))


def _fp32(cpuinfo: str, max_khz: int) -> PhysicalPeak:
    flags: set[str] = set()
    mhz, cores = 0.0, set()
    phys = "0"
    for line in cpuinfo.splitlines():
        key, _, said = (s.strip() for s in line.partition(":"))
        if key == "flags" and not flags:
            flags = set(said.split())
        elif key == "cpu MHz":
            mhz = max(mhz, _float(said))
        elif key == "physical id":
            phys = said
        elif key == "core id":
            cores.add((phys, said))
    n_cores = len(cores) or logical_cpus()
    lanes, isa = next(((n, f) for f, n in _LANES if f in flags), (1, "scalar"))
    fma = FMA_UNITS if "fma" in flags or "avx512f" in flags else 1
    per_cycle = fma * lanes * 2
    ghz, clock = (max_khz / 1e6, "cpufreq's maximum") if max_khz else (mhz / 1e3, "cpu MHz")
    if not ghz:
        return PhysicalPeak("fp32", float("nan"), "no clock reported", "/proc/cpuinfo")
    value = n_cores * per_cycle * ghz * 1e9
    formula = (
        f"{n_cores} cores × {per_cycle} FLOP/cycle ({isa}: {lanes} lanes"
        + (f", {fma} FMA units assumed" if fma > 1 else ", no FMA")
        + f") × {ghz:.2f} GHz ({clock})"
    )
    return PhysicalPeak("fp32", value, formula, "/proc/cpuinfo flags, cores and clock")


def _dram(dmi: bytes | None) -> PhysicalPeak:
    raw = dmi if dmi is not None else _read_bytes(DMI_TABLE)
    devices = dimm_bandwidth(raw) if raw else []
    if not devices:
        why = "not readable here (no SMBIOS memory records: a VM, or not root)"
        return PhysicalPeak("memory", float("nan"), why, str(DMI_TABLE))
    total = sum(mts * width for mts, width in devices) * 1e6 / 8
    speeds = sorted({mts for mts, _ in devices})
    formula = (
        f"{len(devices)} memory devices × {'/'.join(map(str, speeds))} MT/s × "
        f"{devices[0][1]} bits (one channel each: an upper bound)"
    )
    return PhysicalPeak("memory", total, formula, f"SMBIOS type 17 ({DMI_TABLE})")


def dimm_bandwidth(table: bytes) -> list[tuple[int, int]]:
    """(speed MT/s, data width bits) of each populated memory device (SMBIOS type 17) in a raw
    SMBIOS structure table; a device with no speed or size is left out."""
    out, i = [], 0
    while i + 4 <= len(table):
        kind, length = table[i], table[i + 1]
        if length < 4:
            break
        body = table[i : i + length]
        if kind == 17 and length >= 0x17:
            width, size, speed = struct.unpack_from("<H", body, 0x0A)[0], 0, 0
            size = struct.unpack_from("<H", body, 0x0C)[0]
            speed = struct.unpack_from("<H", body, 0x15)[0]
            if length >= 0x22:  # the configured speed, where the record has it
                speed = struct.unpack_from("<H", body, 0x20)[0] or speed
            if size not in (0, 0xFFFF) and speed not in (0, 0xFFFF) and width not in (0, 0xFFFF):
                out.append((speed, width))
        if kind == 127:  # end of table
            break
        end = table.find(b"\0\0", i + length)  # the strings after the formatted area
        if end < 0:
            break
        i = end + 2
    return out


@functools.cache
def _max_khz() -> int:
    text = _read_text("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").strip()
    return int(text) if text.isdigit() else 0


def _read_text(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0
