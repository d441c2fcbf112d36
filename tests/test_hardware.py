"""The physical peaks from the machine's own description (issue 47 item 1): the formula on
described CPUs and a crafted SMBIOS table, this machine's core count against psutil's, and the
roofline showing them beside the measured ceilings, labelled as predicted."""

from __future__ import annotations

import math
import struct

import psutil

import ortlab
from ortlab.core.hardware import dimm_bandwidth, physical_peaks


def _cpuinfo(cores: int, flags: str, mhz: float, threads_per_core: int = 1) -> str:
    blocks = []
    for c in range(cores):
        for _ in range(threads_per_core):  # hyperthreads share their core's id
            blocks.append(
                f"processor\t: {len(blocks)}\nmodel name\t: Test CPU\ncpu MHz\t\t: {mhz}\n"
                f"physical id\t: 0\ncore id\t\t: {c}\nflags\t\t: {flags}\n"
            )
    return "\n".join(blocks)


def test_fp32_peak_is_cores_times_fma_width_times_clock() -> None:
    avx512 = physical_peaks(_cpuinfo(4, "sse2 avx avx2 fma avx512f", 2000.0, 2), 3_000_000, b"")
    fp32 = avx512[0]
    assert fp32.dtype == "fp32"
    assert math.isclose(fp32.value, 4 * 2 * 16 * 2 * 3.0e9)  # the max clock, not cpu MHz
    assert "4 cores" in fp32.formula and "64 FLOP/cycle" in fp32.formula
    assert "cpufreq's maximum" in fp32.formula
    avx2 = physical_peaks(_cpuinfo(2, "sse2 avx avx2 fma", 2445.4), 0, b"")[0]
    assert math.isclose(avx2.value, 2 * 32 * 2.4454e9)
    assert "2.45 GHz (cpu MHz)" in avx2.formula
    no_fma = physical_peaks(_cpuinfo(1, "sse2 avx", 1000.0), 0, b"")[0]
    assert math.isclose(no_fma.value, 1 * 16 * 1e9) and "no FMA" in no_fma.formula
    assert math.isnan(physical_peaks("", 0, b"")[0].value)


def _type17(size_mb: int, speed: int, configured: int, width: int = 64) -> bytes:
    body = bytearray(0x28)
    body[0], body[1] = 17, 0x28
    struct.pack_into("<H", body, 0x08, width)
    struct.pack_into("<H", body, 0x0A, width)
    struct.pack_into("<H", body, 0x0C, size_mb)
    struct.pack_into("<H", body, 0x15, speed)
    struct.pack_into("<H", body, 0x20, configured)
    body[0x10] = 1  # a device locator string
    return bytes(body) + b"DIMM A1\0\0"


def test_dram_peak_from_smbios_memory_devices() -> None:
    """Populated devices count at their configured speed; an empty slot does not; the table
    ends at type 127."""
    other = bytes([4, 4, 0, 0]) + b"\0\0"  # a processor record with no strings
    end = bytes([127, 4, 0, 0]) + b"\0\0"
    table = other + _type17(16384, 3200, 2933) + _type17(0, 0, 0) + _type17(16384, 3200, 0)
    table += end + _type17(16384, 4800, 4800)  # after the end: not read
    assert dimm_bandwidth(table) == [(2933, 64), (3200, 64)]
    dram = physical_peaks("", 0, table)[1]
    assert math.isclose(dram.value, (2933 + 3200) * 1e6 * 8)
    assert "2 memory devices" in dram.formula and "upper bound" in dram.formula
    unread = physical_peaks("", 0, b"")[1]
    assert math.isnan(unread.value) and "not readable" in unread.formula


def test_this_machines_cores_agree_with_psutil() -> None:
    fp32 = physical_peaks()[0]
    if math.isnan(fp32.value):  # no /proc/cpuinfo clock: nothing to compare
        return
    assert fp32.formula.startswith(f"{psutil.cpu_count(logical=False)} cores ×")


def test_roofline_shows_the_physical_peaks_as_predicted() -> None:
    r = ortlab.roofline(ortlab.examples.load("mlp"), runs=3, progress=False)
    assert [p.dtype for p in r.physical] == ["fp32", "memory"]
    text = r.to_text()
    assert "Physical peaks (predicted from the machine's description, not measured)" in text
    assert r.physical[0].formula in text
    assert "Physical (predicted, not measured)" in r._repr_html_()
    names = [t.name for t in r.plot().data]
    assert any("physical" in n and "(predicted)" in n for n in names if n)
    back = ortlab.RooflineResult.from_json(r.to_json())
    for a, b in zip(back.physical, r.physical, strict=True):
        assert a.value == b.value or (math.isnan(a.value) and math.isnan(b.value))
    assert [p.formula for p in back.physical] == [p.formula for p in r.physical]
