"""The doctor's rules about what a session holds and would do elsewhere: its memory (measured
in fresh processes) and a requested NPU EP's predicted partition. Pure functions from
:class:`~ortlab.diagnosis.facts.Facts` to findings, like :mod:`ortlab.diagnosis.rules`."""

from __future__ import annotations

from ortlab.core.config import SessionConfig
from ortlab.core.machine import IDLE_WINDOW_S
from ortlab.core.runtime import TIMED_SPIN_US
from ortlab.core.units import fmt_bytes, fmt_ms
from ortlab.diagnosis.counted import counted
from ortlab.diagnosis.facts import Facts, Finding, Gain, Kind, candidate_key, load_caveat

__all__ = ["IDLE_SPIN_CORES", "config_args", "idle_spin", "memory", "npu_partition"]

IDLE_SPIN_CORES = 0.1
"""An idle session keeping this many cores busy or more (its pool spinning) is a finding."""


def config_args(config: SessionConfig, base: SessionConfig) -> str:
    """The settings of ``config`` that differ from ``base``, as SessionConfig arguments."""
    ref = base.to_dict()
    changed = [
        f"{k}={v!r}" for k, v in config.to_dict().items() if ref.get(k) != v and k != "fallback"
    ]
    return ", ".join(changed)


def npu_partition(f: Facts) -> list[Finding]:
    """A requested NPU EP that does not run here: its predicted partition, the reasons nodes
    fall back (grouped), and what fixing the input shapes gains — every number from the EP's
    own compiler or op lists (``ortlab.whatif``), labelled as a prediction."""
    if f.seen.predicted is None:
        return []
    out = []
    fixed = f.seen.predicted_fixed.summary() if f.seen.predicted_fixed is not None else None
    reasons = f.seen.predicted.reasons()
    for s in f.seen.predicted.summary().itertuples():
        if s.evidence not in ("compiled", "rules"):
            continue
        total = int(s.on_target) + int(s.on_cpu)
        top = reasons[reasons["target"] == s.target].head(3)
        why = "; ".join(f"{int(r.nodes)} {r.reason}" for r in top.itertuples()) or "none"
        after = ""
        if fixed is not None:
            row = fixed[fixed["target"] == s.target]
            if len(row) and row.iloc[0]["evidence"] in ("compiled", "rules"):
                after = (
                    f"; with the input shapes fixed (dims/feeds) it takes "
                    f"{int(row.iloc[0]['on_target'])}"
                )
        title = f"{s.target.upper()} would take {int(s.on_target)} of {total} nodes (predicted)"
        out.append(
            Finding(
                rule="npu_partition",
                title=title,
                evidence=f"{s.evidence} evidence ({s.ep} cannot run here): falls back because of "
                f"{why}{after}",
                fix=str(top.iloc[0]["fix"]) if len(top) else "nothing falls back",
                code=f"ortlab.whatif(model, targets=[{s.target!r}], dims={{...}})",
                gain="a prediction: no time measured on the target device",
                severity="info",
            )
        )
    return out


def memory(f: Facts) -> list[Finding]:
    """What the session holds in memory, and the memory setting that lowers it — measured in
    fresh processes (peak and held), with the time it costs from the screen."""
    fp = f.footprint
    if fp is None or not fp.reference.peak_bytes:
        return []
    ref = fp.reference
    ort_view = ""
    if f.seen.allocator.get("arena_bytes", -1) >= 0 and f.seen.allocator.get("peak_bytes", -1) >= 0:
        ort_view = (
            f"; ORT's allocator: the arena holds {fmt_bytes(f.seen.allocator['arena_bytes'])}"
            f" after a run, {fmt_bytes(f.seen.allocator['peak_bytes'])} in use at its peak"
        )
    evidence = (
        f"the session adds {fmt_bytes(ref.peak)} resident at its peak and holds "
        f"{fmt_bytes(ref.held)} after its runs, for {fmt_bytes(fp.weights_bytes)} of "
        f"weights (median of {fp.repeats} fresh processes){ort_view}"
    )
    savings = fp.savings()
    tried = ", ".join(r.setting for r in fp.rows[1:]) or "no setting"
    if not savings:
        return [
            Finding(
                rule="memory",
                title="memory: no setting tried lowers the session's peak",
                evidence=f"{evidence}; {tried}: none lowers the peak by 5 % or more, beyond the "
                "spread between fresh processes",
                fix="nothing to change here; a smaller peak needs a smaller model (quantization) "
                "or smaller inputs",
                code=f"ortlab.footprint(model)  # {tried} side by side",
                gain="not applicable",
                severity="info",
            )
        ]
    best = savings[0]
    said = counted(f.measured, candidate_key(Kind.MEMORY, best.setting))
    timed = said.row if said is not None else None
    share = -best.peak_change / ref.peak
    if said is None:
        cost = "its effect on latency was not measured (the time budget)"
    elif said.row.slower:
        cost = f"it costs time: {said.verdict()}"
    else:
        cost = f"latency: {said.verdict()}"
    others = "; ".join(f"{r.setting}: {r.verdict()}" for r in savings[1:])
    return [
        Finding(
            rule="memory",
            title=f"memory: {best.setting} lowers the session's peak by "
            f"{fmt_bytes(-best.peak_change)} ({share:.0%})",
            evidence=evidence + (f"; also measurable: {others}" if others else ""),
            fix=f"build the session with {best.setting}"
            + (
                " when memory matters more than the time it costs"
                if timed is not None and timed.slower
                else ""
            )
            + f": {best.verdict()}; {cost}",
            code=f"SessionConfig({config_args(best.config, f.seen.requested)})",
            gain=f"{best.verdict()}; {cost}",
            ratio=timed.paired.ratio if timed else None,
            low=timed.paired.low if timed else None,
            high=timed.paired.high if timed else None,
            key=said.key if said else "",
            severity="info" if timed is not None and timed.slower else "warning",
        )
    ]


def idle_spin(f: Facts) -> list[Finding]:
    """A session whose thread pool keeps cores busy once idle (ORT's spinning): the cores it
    burns after its runs, against the same session with spinning bounded in time (where the
    runtime has it) and with spinning off, each measured in the CPU stage, with what each
    costs in latency (the screen's verdict). The fix is the bounded spin where it keeps the
    latency, else spinning off."""
    cpu = f.cpu
    base = cpu.baseline if cpu is not None else None
    if cpu is None or base is None or not base.idle_cores >= IDLE_SPIN_CORES:
        return []
    said = f"idle: {base.idle_cores:.2f} cores busy in the {IDLE_WINDOW_S:g} s after its runs"
    ways = []  # (key, words, CPU row, counted timing): bounded first, then off
    for key, words in (
        (candidate_key(Kind.SPIN, f"{TIMED_SPIN_US}us"), f"spinning at most {TIMED_SPIN_US} µs"),
        (candidate_key(Kind.SPIN, "off"), "spinning off"),
    ):
        row, timed = cpu.rows.get(key), counted(f.measured, key)
        if row is not None and timed is not None:
            ways.append((key, words, row, timed))
    caveat = load_caveat(f)
    slower, bounded = False, False
    if not ways:
        evidence = f"{said} (median of {cpu.rounds} rounds); spinning off was not measured"
        fields: Gain = {"gain": "not measured (the time budget)"}
    else:
        parts = [
            f"→ {row.idle_cores:.2f} with {words}: CPU per run {base.cpu_ms:.3f} → "
            f"{fmt_ms(row.cpu_ms)} ({row.paired.verdict}); p50 {fmt_ms(f.baseline_ms)} → "
            f"{fmt_ms(timed.row.p50_ms)} ({timed.verdict()})"
            for _, words, row, timed in ways
        ]
        evidence = f"{said} (median of {cpu.rounds} rounds); " + "; ".join(parts)
        # the first way that keeps the latency; spinning off where none does
        key, words, row, timed = next((w for w in ways if not w[3].row.slower), ways[-1])
        bounded = not key.endswith(":off")
        fields = timed.gain(f.baseline_ms)
        fields["gain"] = (
            f"{words}: {max(base.idle_cores - row.idle_cores, 0):.2f} cores freed while idle; "
            f"{row.paired.verdict}; latency: {timed.verdict()}"
        )
        slower = timed.row.slower
    fix, code = _spin_fix(bounded=bounded, slower=slower)
    return [
        Finding(
            rule="idle_spin",
            title=f"idle, the session keeps {base.idle_cores:.2f} cores busy spinning"
            + (" (measured under load)" if caveat else ""),
            evidence=evidence + (f"; {caveat}" if caveat else ""),
            fix=fix,
            code=code,
            severity="info" if slower else "warning",
            **fields,
        )
    ]


def _spin_fix(*, bounded: bool, slower: bool) -> tuple[str, str]:
    """The fix and its code: spinning bounded in time, or off."""
    if bounded:
        return (
            f"bound the spinning in time (spin_duration_us={TIMED_SPIN_US}): idle threads spin "
            "that long, then sleep, and the latency stays that of spinning",
            f"SessionConfig(spin_duration_us={TIMED_SPIN_US})  # onnxruntime 1.31.1+: so.add_"
            f"session_config_entry('session.intra_op.spin_duration_us', '{TIMED_SPIN_US}')",
        )
    return (
        "build the session with allow_spinning=False where it waits between calls or shares "
        "the machine (a service, a notebook beside other work)"
        + ("; it costs latency: keep spinning where microseconds matter" if slower else ""),
        "SessionConfig(allow_spinning=False)  # onnxruntime: so.add_session_config_"
        "entry('session.intra_op.allow_spinning', '0')",
    )


def memory_growth(f: Facts) -> list[Finding]:
    """Memory that grows run after run as configured (the doctor's short soak): how fast,
    where (fresh inputs or fresh shapes), what ORT's arena did, and which measured setting
    stops it."""
    r = f.soak
    if r is None:
        return []
    grew = r.grows()
    if not grew:
        return []
    where = "; ".join(f"{x.phase}: {x.verdict()}, {x.arena_said()}" for x in grew)
    stops = r.stops_it()
    others = "; ".join(
        f"{x.setting}, {x.phase}: {x.verdict()}"
        for x in r.rows
        if x.setting != "as configured" and x.phase in {g.phase for g in grew}
    )
    if stops and stops[0] == "arena off":
        fix = (
            "build the session with the arena off (enable_cpu_mem_arena=False) where it "
            "serves inputs of changing shapes for long; time it first: the arena saves "
            "allocations"
        )
        code = "SessionConfig(enable_cpu_mem_arena=False)  # so.enable_cpu_mem_arena = False"
    elif stops:
        fix = f"run with {stops[0]} (measured side by side in ortlab.soak)"
        code = "ortlab.soak(model)  # every setting side by side"
    else:
        fix = (
            "no setting measured stops it: run ortlab.soak(model) for every setting and "
            "ortlab.version_diff to see whether another onnxruntime grows less"
        )
        code = "ortlab.soak(model); ortlab.version_diff(model)"
    slope = max(x.fit[0] for x in grew)
    return [
        Finding(
            rule="memory_growth",
            title=f"memory grows run after run: {slope / 2**20:.2f} MB per run as configured",
            evidence=f"{where} ({r.runs} runs a phase, in a process of its own)"
            + (f"; {others}" if others else ""),
            fix=fix,
            code=code,
            gain="memory: growth per run stopped" if stops else "not measured",
            severity="warning",
        )
    ]
