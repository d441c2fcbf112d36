"""The doctor's search: observe the session, build candidate fixes, time them interleaved with
the baseline (screen, prune, measure survivors), combine the winners and verify the combination.

Stages, each in the worker and each bounded by the budget:

1. observe: profile the baseline (op time shares, profiler overhead), placement when an
   accelerator EP loaded;
2. candidates: levels above the requested one, intra-op threads 1…cores, spinning off, IO binding
   for small models, CPU-only when an accelerator leaves CPU islands, CUDA graphs when CUDA
   loaded and shapes are static; model variants (initializer-input fix, transformers optimizer,
   int8 dynamic for MatMul-heavy / static QDQ per-channel for conv-heavy, the caller's own);
3. screen: 6 interleaved rounds of everything (the fewest a 95 % interval needs, see
   :data:`ortlab.core.stats.MIN_ROUNDS`); candidates whose whole interval is slower than the noise
   band are pruned; the survivors get more rounds (paired per round, so rounds from both calls
   pool);
4. combine: the fastest significant setting per dimension plus the best accurate variant, timed
   again against the baseline with the two best single changes.

A candidate that fails — its variant cannot be built (ORT's quantizer raises ``ValueError``,
``AssertionError``…), its session cannot be built or its first run fails in the worker — is
recorded as a :class:`~ortlab.diagnosis.facts.CandidateFailure` (a finding) and left out; the
others go on.
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ortlab.analysis.memory import footprint, memory_settings
from ortlab.analysis.metrics import output_errors, scorable, unscorable
from ortlab.analysis.optimization import initializer_input_blocker
from ortlab.analysis.placement import placement
from ortlab.analysis.profiling import profile
from ortlab.analysis.quant_error import QuantFix, quantization_error
from ortlab.analysis.quantization import QuantConfig, calibration_data
from ortlab.analysis.quantization import quantize as make_quantized
from ortlab.analysis.transformer_opt import transformer_optimize
from ortlab.analysis.variants import variant_row, variant_signals
from ortlab.analysis.whatif import DEFAULT_TARGETS, TARGETS, whatif
from ortlab.core.config import LEVELS, SessionConfig
from ortlab.core.errors import OrtlabError, WorkerCancelledError, error_text
from ortlab.core.machine import cpu_flags
from ortlab.core.model import Model, load, without_initializer_inputs
from ortlab.core.stats import MIN_ROUNDS, NOISE_BAND, Verdict, paired_ratio
from ortlab.diagnosis.best import Best
from ortlab.diagnosis.facts import (
    FUSED_TRANSFORMER_OPS,
    SMALL_MODEL_MS,
    CandidateFailure,
    Facts,
    FixTried,
    Measured,
)
from ortlab.diagnosis.rules import attention_shaped
from ortlab.engine.calls import call, measure_interleaved

__all__ = ["LEVEL_ORDER", "Search", "physical_cores"]

Item = tuple[str, Model, SessionConfig, list[str]]
"""(key, model, config, steps that made the model)."""
T = TypeVar("T")
LEVEL_ORDER = tuple(LEVELS)
QUANT_FIX_NODES = 5
"""The worst nodes (lowest SQNR) an int8 fix spares."""
_FIX_KINDS = (("spare", "left in float"), ("16bit", "their outputs quantized to 16 bits"))
"""The variants ``ErrorResult.fix`` makes, in its order: key tag, how the nodes are spared."""
MEMORY_REPEATS = 4
"""Fresh processes per memory setting: the fewest that give a 95 % interval (97 %)."""
WHATIF_TARGETS = {t: TARGETS[t] for t in DEFAULT_TARGETS}
"""What-if targets by the EP they predict."""


def physical_cores() -> int:
    import psutil

    return int(psutil.cpu_count(logical=False) or os.cpu_count() or 1)


class Search:
    """State of one doctor run (kept off the result: models, feeds, timing plan)."""

    def __init__(
        self,
        m: Model,
        *,
        cfg: SessionConfig,
        feeds: Any,
        budget_s: float,
        min_cosine: float,
        progress: Any,
        timeout: float | None,
        t0: float,
        max_rounds: int = 8,
    ) -> None:
        self.m, self.cfg, self.feeds = m, cfg, feeds
        self.budget_s, self.min_cosine, self.t0 = budget_s, min_cosine, t0
        self.progress, self.timeout = progress, timeout
        self.max_rounds = max_rounds
        self.notes: list[str] = []
        self.profile: Any = None
        self.rounds = 0
        self.runs = 3
        self.outputs: dict[str, list[dict[str, np.ndarray]]] = {}
        self.latencies: dict[str, list[int]] = {}
        self.failures: list[CandidateFailure] = []

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.t0)

    def call_timeout(self) -> float:
        """One worker call's limit: what is left of the budget plus a fifth of it, so the doctor
        ends within its budget + 25 % whatever one call does (a call cut short is a failure,
        recorded, and the doctor goes on or stops with what it measured); the caller's own
        ``timeout`` when that is smaller."""
        limit = max(self.left() + BUDGET_SLACK * self.budget_s, 2.0)
        return limit if self.timeout is None else min(limit, self.timeout)

    def guarded(self, what: str, stage: str, fn: Callable[[], T], code: str = "") -> T | None:
        """``fn()``, or None after recording its failure: one failing candidate never ends the
        doctor. A cancel from the user still does."""
        try:
            return fn()
        except WorkerCancelledError:
            raise
        except Exception as err:  # noqa: BLE001 - ORT's tools raise anything (ValueError,
            # AssertionError with no message, IndexError…); each is a finding, not the end.
            self.failures.append(CandidateFailure(what, _failure_text(err), stage, code))
            return None

    # -- observe ----------------------------------------------------------------

    def observe(self) -> Facts:

        m, cfg = self.m, self.cfg
        prof = profile(
            m, cfg, self.feeds, runs=5, warmup=2, progress=False, timeout=self.call_timeout()
        )
        self.profile = prof
        report = prof.report
        assert report is not None  # profile() always attaches the session's report
        shares = prof.by_op_type().groupby("op_type")["share"].sum().to_dict()
        facts = Facts(
            model_name=m.name,
            requested=cfg,
            report=report,
            op_counts=dict(m.summary.op_types),
            baseline_ms=float(np.median(prof.data.run_us)) / 1e3,
            symbolic_inputs=_symbolic_inputs(m, cfg),
            op_time_share={str(k): float(v) for k, v in shares.items()},
            profiled_ms=float(np.median(prof.data.run_us)) / 1e3,
            initializer_blocker=initializer_input_blocker(m),
            cores=physical_cores(),
            min_cosine=self.min_cosine,
        )
        if any(p != "CPUExecutionProvider" for p in report.active):
            facts.placement = placement(
                m, cfg, self.feeds, runs=3, progress=False, timeout=self.call_timeout()
            )
        mem = prof.memory()
        if len(mem):
            facts.allocator = {"arena_bytes": float(mem["arena_bytes"].iloc[-1]),
                               "peak_bytes": float(mem["peak_bytes"].max())}  # fmt: skip
        self._predict(facts)
        return facts

    def memory(self, facts: Facts) -> None:
        """The session's resident memory and each memory setting's, in fresh processes; the
        settings that lower the peak enough to matter are then timed like any candidate."""
        if self.left() < 0:
            self.notes.append("the memory footprint was not measured: the time budget was used up")
            return
        facts.footprint = self.guarded(
            "the memory footprint", "memory",
            lambda: footprint(self.m, self.cfg, self.feeds, repeats=MEMORY_REPEATS, runs=2,
                              progress=False, timeout=self.call_timeout()),
            "ortlab.footprint(model)",
        )  # fmt: skip

    def _predict(self, facts: Facts) -> None:
        """A requested NPU EP that does not run here (QNN, NNAPI, CoreML, OpenVINO): predict
        its partition with ``ortlab.whatif`` (its real compiler where one runs without the
        device), as exported and at the timed shapes, so the rules can say why nodes fall
        back and what fixing the shapes gains."""
        missing = [i.provider.split(":")[0] for i in facts.report.missing]
        targets = [t for t, ep in WHATIF_TARGETS.items() if ep in missing]
        if not targets:
            return
        facts.predicted = self.guarded(
            f"the what-if partition for {', '.join(targets)}", "observe",
            lambda: whatif(self.m, targets, progress=False, timeout=self.call_timeout()),
        )  # fmt: skip
        if facts.predicted is not None and facts.symbolic_inputs:
            facts.predicted_fixed = self.guarded(
                "the what-if partition at the timed shapes", "observe",
                lambda: whatif(self.m, targets, feeds=self.feeds, progress=False,
                               timeout=self.call_timeout()),
            )  # fmt: skip

    # -- candidates -------------------------------------------------------------

    def candidates(
        self, facts: Facts, user_variants: Sequence[Any], *, quantize: bool, transformers: bool
    ) -> list[Item]:
        cfg, m = self.cfg, self.m
        items: list[Item] = [("baseline", m, cfg, [])]
        for level in ("basic", "extended", "all"):
            if LEVEL_ORDER.index(level) > LEVEL_ORDER.index(cfg.level):
                items.append((f"level:{level}", m, cfg.with_(level=level), []))
        logical = os.cpu_count() or 1
        for n in sorted({1, max(facts.cores // 2, 1), facts.cores, logical}):
            if n != cfg.intra_op_threads:
                items.append((f"threads:{n}", m, cfg.with_(intra_op_threads=n), []))
        if cfg.allow_spinning is not False:
            items.append(("spin:off", m, cfg.with_(allow_spinning=False), []))
        if not cfg.io_binding and facts.baseline_ms < SMALL_MODEL_MS * 5:
            items.append(("iobinding", m, cfg.with_(io_binding=True), []))
        pl = facts.placement
        if pl is not None and any(p.provider == "CPUExecutionProvider" for p in pl.partition_rows):
            items.append(("cpu-only", m, cfg.with_(providers=["cpu"], provider_options={}), []))
        if "CUDAExecutionProvider" in facts.report.active and not facts.symbolic_inputs:
            opts = {**cfg.options_for("CUDAExecutionProvider"), "enable_cuda_graph": "1"}
            items.append(
                (
                    "cuda-graph",
                    m,
                    cfg.with_(provider_options={"CUDAExecutionProvider": opts}, io_binding=True),
                    [],
                )
            )
        fp = facts.footprint
        if fp is not None:
            settings = memory_settings(cfg)
            for row in fp.savings():
                items.append((f"memory:{row.setting}", m, settings[row.setting], []))
        ref = self.variant_config()
        for key, variant, steps in self._variants(facts, user_variants, quantize, transformers):
            items.append((key, variant, ref, steps))
        return items

    def variant_config(self) -> SessionConfig:
        """Variants are timed at level 'all' when the requested level is lower, so their gain
        is the model change alone (compared with the original at that same level)."""
        if LEVEL_ORDER.index(self.cfg.level) < LEVEL_ORDER.index("extended"):
            return self.cfg.with_(level="all")
        return self.cfg

    def _variants(
        self, facts: Facts, user_variants: Sequence[Any], quantize: bool, transformers: bool
    ) -> list[tuple[str, Model, list[str]]]:

        m, out = self.m, []

        def attempt(
            what: str, build: Callable[[], tuple[str, Model, list[str]]], code: str
        ) -> None:
            if self.left() < 0:
                self.notes.append(f"skipped {what}: the time budget was used up")
                return
            built = self.guarded(what, "build", build, code)
            if built is not None:
                out.append(built)

        if facts.initializer_blocker:
            attempt(
                "the initializer-input fix",
                lambda: (
                    "variant:no-initializer-inputs",
                    without_initializer_inputs(m),
                    ["ortlab.without_initializer_inputs(model)"],
                ),
                "ortlab.without_initializer_inputs(model)",
            )
        ops = facts.op_counts
        if transformers and attention_shaped(ops) and not FUSED_TRANSFORMER_OPS & set(ops):

            def optimized() -> tuple[str, Model, list[str]]:
                r = transformer_optimize(m, progress=False, timeout=self.call_timeout())
                facts.transformer_fused = {k: v for k, v in r.fused_operators.items() if v}
                facts.attention_reason = r.reason or None
                return (
                    "variant:transformers",
                    load(r.path, name=f"{m.name}-transformers"),
                    [
                        f"ortlab.transformer_optimize(model)  # {r.model_type}, "
                        f"heads={r.num_heads}, hidden={r.hidden_size}"
                    ],
                )

            attempt("the transformers optimizer", optimized, "ortlab.transformer_optimize(model)")
        wanted = _wanted_quantization(facts.op_time_share, facts.op_counts) if quantize else []

        def quantized(kind: str, qc: QuantConfig) -> tuple[str, Model, list[str]]:
            # calibrated at the timed feeds' shapes (ortlab.quantize synthesizes samples like them)
            q = make_quantized(m, qc, feeds=self.feeds, timeout=self.call_timeout())
            return f"variant:quant-{kind}", q, list(q.variant.steps) if q.variant else []

        def given(v: Any) -> tuple[str, Model, list[str]]:
            vm = load(v)
            return f"variant:{vm.name}", vm, list(vm.variant.steps) if vm.variant else ["given"]

        for kind, qc in wanted:
            code = f"ortlab.quantize(model, {_quant_args(qc)})"
            attempt(qc.label(), functools.partial(quantized, kind, qc), code)
        for i, v in enumerate(user_variants):
            what = f"variant {i} ({_describe(v)})"
            attempt(what, functools.partial(given, v), f"ortlab.load({_describe(v)!r})")
        return out

    # -- measuring --------------------------------------------------------------

    def _plan(self, n_items: int, facts: Facts, share: float, what: str) -> tuple[int, int]:
        """Runs per measurement and rounds (at most ``max_rounds``) that fit ``share`` of the
        remaining budget. Runs are cut before rounds, as a verdict needs MIN_ROUNDS rounds; when
        even the fewest runs leave fewer, ``what`` gets what fits (at least 2: one A B, one B A)
        and a note says its candidates get no verdict."""
        per_run = max(facts.baseline_ms, 0.01) / 1e3
        floor = 2 if per_run >= 0.02 else 3  # slow models: rounds matter more than runs
        runs = int(min(max(math.ceil(0.03 / per_run), floor), 200))
        build = facts.report.create_ms / 1e3
        available = max(self.left() * share - n_items * build, 0.0)

        def fit(r: int) -> int:
            return int(available / max(n_items * r * per_run, 1e-6))

        rounds = fit(runs)
        while rounds < MIN_ROUNDS and runs > floor:
            runs = max(runs // 2, floor)
            rounds = fit(runs)
        rounds = max(min(rounds, self.max_rounds), 2)
        if rounds < MIN_ROUNDS:
            spent = self.budget_s - self.left()
            needed = spent + n_items * (build + MIN_ROUNDS * runs * per_run) / share
            self.notes.append(
                f"the time budget ({self.budget_s:g} s, {max(self.left(), 0):.1f} s left) has no "
                f"room for {MIN_ROUNDS} rounds in {what}, the fewest a 95 % verdict needs: it ran "
                f"{rounds}, so its candidates get 'not enough rounds for a verdict'; raise "
                f"budget_s to about {math.ceil(needed)} s"
            )
        return runs, rounds

    def _time(
        self, items: list[Item], rounds: int, runs: int, desc: str
    ) -> tuple[np.ndarray, list[Item]]:
        """Median ms per round (rows) and candidate (columns) of the candidates that ran, and
        those candidates. The ones the worker could not build or run (its ``failed``) are
        recorded as failures and left out."""

        out = measure_interleaved(
            [(mm, c) for _, mm, c, _ in items], self.feeds, rounds=rounds, runs=runs, desc=desc,
            context=f"of {self.m.name!r} ({len(items)} candidates)", progress=self.progress,
            timeout=self.call_timeout(),
        )  # fmt: skip
        failed = out.failed
        if 0 in failed:  # the worker raises for the reference itself; never compare without it
            raise OrtlabError(f"The reference {items[0][0]!r} failed while timing: {failed[0]}")
        for k, msg in sorted(failed.items()):
            key, mm, c, _ = items[k]
            code = f"ortlab.benchmark(model, SessionConfig.from_json({c.to_json()!r}))"
            what = f"candidate {key} ({self._variant(mm)} · {c.label()})"
            self.failures.append(CandidateFailure(what, msg, "timing", code))
        ran = [k for k in range(len(items)) if k not in failed]
        med = out.medians_ms[:, ran]  # one column per item, NaN where one failed
        lat = [out.latencies_ns[k] for k in ran]
        kept = [items[k] for k in ran]
        for (key, *_), times in zip(kept, lat, strict=True):
            self.latencies.setdefault(key, []).extend(times)
        return med, kept

    def screen(self, items: list[Item], facts: Facts) -> list[Item]:
        """Stage 1: every candidate, MIN_ROUNDS rounds; stage 2: the survivors, more rounds.
        Returns the candidates that ran (the failed ones are left out)."""
        runs, rounds = self._plan(len(items), facts, 0.35, "the screen")
        self.runs = runs
        first_n = min(rounds, MIN_ROUNDS)
        first, items = self._time(items, first_n, runs, f"doctor: screen {len(items)} candidates")
        ref = self._ref_index(items)
        medians = {it[0]: list(first[:, k]) for k, it in enumerate(items)}
        slower = [
            items[k][0]
            for k in range(len(items))
            if k not in (0, ref) and _clearly_slower(first, _base(items, k, ref), k)
        ]
        if slower:
            self.notes.append("pruned after the screen (clearly slower): " + ", ".join(slower))
        keep = [it for it in items if it[0] not in slower]
        more = rounds - first_n if len(keep) > 1 else 0
        self.rounds = first_n
        if more > 0 and self.left() <= 0:
            self.notes.append("the survivors of the screen were not re-measured: no time left")
        elif more > 0:
            second, ran = self._time(keep, more, runs, "doctor: measure survivors")
            for j, (key, *_) in enumerate(ran):
                medians[key].extend(second[:, j])
            lost = {it[0] for it in keep} - {it[0] for it in ran}
            items = [it for it in items if it[0] not in lost]
            self.rounds += more
        self._record_screen(items, medians, facts)
        return items

    def _record_screen(
        self, items: list[Item], medians: dict[str, list[float]], facts: Facts
    ) -> None:
        ref = self._ref_index(items)
        for k, (key, mm, c, steps) in enumerate(items):
            b = _base(items, k, ref)
            base = medians[items[b][0]]
            n = min(len(medians[key]), len(base))  # pruned ones stop after the first rounds
            v = paired_ratio(base[:n], medians[key][:n])
            p50 = float(np.median(np.asarray(self.latencies[key]) / 1e6))
            facts.measured[key] = _measured(
                key,
                mm,
                c,
                steps,
                v,
                p50=p50,
                stage="screen",
                against=items[b][0],
                variant=self._variant(mm),
            )
        facts.baseline_ms = facts.measured["baseline"].p50_ms

    def _accurate(self, v: Measured) -> bool:
        """Output cosine >= min_cosine; NaN means the same model under other settings (not
        compared in the screen; the final combination is)."""
        return math.isnan(v.cosine) or v.cosine >= self.min_cosine

    def _variant(self, mm: Model) -> str:
        return "original" if mm is self.m else mm.name

    def _ref_index(self, items: list[Item]) -> int:
        ref = self.variant_config()
        for k, (key, mm, c, _) in enumerate(items):
            if mm is self.m and c == ref and not key.startswith(("threads:", "spin:")):
                return k
        return 0

    def accuracy(self, items: list[Item], facts: Facts, eval_data: Any) -> None:
        """Output cosine of every model variant against the original, on the same samples."""

        # At the shapes that are timed: the feeds' own (the caller's first), never defaults.
        self.samples = calibration_data(self.m, eval_data, limit=4, seed=100, like=self.feeds)
        self.outputs["baseline"] = self._outputs(self.m, self.cfg)
        self.notes += _degenerate_notes(self.outputs["baseline"])
        for key, mm, c, _ in items:
            if mm is self.m or key not in facts.measured:
                continue
            got = self.guarded(
                f"the accuracy of {key}", "accuracy", functools.partial(self._outputs, mm, c)
            )
            if got is None:  # the variant does not run on the samples: never the best
                facts.measured[key] = _with_cosine(facts.measured[key], 0.0)
                continue
            self.outputs[key] = got
            facts.measured[key] = _with_cosine(facts.measured[key], self._cosine(key))

    def fix_quantization(self, items: list[Item], facts: Facts) -> list[Item]:
        """For each int8 variant below ``min_cosine``: the variants that spare its worst nodes
        (``quantization_error(...).fix``), timed interleaved with the original and the full
        variant, and scored on the same samples. Returns ``items`` with the fixes added, so
        the combination stage can pick one like any candidate."""
        low = [(key, mm, c, steps) for key, mm, c, steps in items
               if key in ("variant:quant-static", "variant:quant-dynamic")
               and key in facts.measured
               and not self._accurate(facts.measured[key])]  # fmt: skip
        for key, q, c, _ in low:
            if self.left() < 0:
                self.notes.append(f"no fix tried for {key}: the time budget was used up")
                break
            fix = self.guarded(
                f"sparing the worst nodes of {key}", "build",
                functools.partial(self._quant_fix, q),
                f"ortlab.quantization_error(model, q).fix(n={QUANT_FIX_NODES})",
            )  # fmt: skip
            if fix is None:
                continue
            fixes: list[Item] = []
            spared: dict[str, str] = {}
            for (tag, how), v in zip(_FIX_KINDS, fix.variants, strict=False):
                fkey = f"{key}-{tag}{len(fix.nodes)}"
                fixes.append((fkey, v, c, list(v.variant.steps)))
                spared[fkey] = how
            facts.quant_fixes[key] = FixTried(list(fix.nodes), spared)
            ref: Item = ("original", self.m, c, [])
            runs, rounds = self._plan(len(fixes) + 2, facts, 0.15, f"the fixes of {key}")
            med, ran = self._time([ref, (key, q, c, []), *fixes], rounds, runs,
                                  f"doctor: fixes of {key}")  # fmt: skip
            for j, (fkey, v, fc, steps) in enumerate(ran[2:], start=2):
                row = _measured(fkey, v, fc, steps, paired_ratio(med[:, 0], med[:, j]),
                                p50=float(np.median(np.asarray(self.latencies[fkey]) / 1e6)),
                                stage="screen", against="the original", variant=v.name)  # fmt: skip
                got = self.guarded(f"the accuracy of {fkey}", "accuracy",
                                   functools.partial(self._outputs, v, fc))  # fmt: skip
                if got is not None:
                    self.outputs[fkey] = got
                facts.measured[fkey] = _with_cosine(row, self._cosine(fkey) if got else 0.0)
                items.append((fkey, v, fc, steps))
        return items

    def _quant_fix(self, q: Model) -> QuantFix:
        err = quantization_error(self.m, q, feeds=self.feeds, limit=4, timeout=self.call_timeout())
        return err.fix(n=QUANT_FIX_NODES, timeout=self.call_timeout())

    def _outputs(self, mm: Model, c: SessionConfig) -> list[dict[str, np.ndarray]]:

        out: list[dict[str, np.ndarray]] = call(
            "outputs_many",
            {
                "model_path": str(mm.path),
                "model_name": mm.name,
                "config": c.with_(io_binding=False),
                "samples": self.samples.samples,
            },
            desc="doctor: outputs",
            context=f"of {mm.name!r}",
            progress=False,
            timeout=self.call_timeout(),
        )
        return out

    def _cosine(self, key: str) -> float:
        """The lowest output cosine against the baseline's outputs. Degenerate outputs never
        pass for accurate: a variant that gives NaN/Inf scores 0; when the baseline's output
        is itself NaN or all zeros, only identical outputs score 1 (the rest 0)."""

        base, other = self.outputs["baseline"], self.outputs[key]
        errors, _ = output_errors(base, other)
        worst = 1.0
        for name, e in errors.items():
            if e["kind"] == "labels":
                worst = min(worst, 1.0 if e["labels_equal"] == 1.0 else 0.0)
                continue
            cos = float(e["cosine"])
            if math.isnan(cos):
                same = all(
                    np.array_equal(scorable(a[name]).values, scorable(b[name]).values,
                                   equal_nan=True)
                    for a, b in zip(base, other, strict=True)
                )  # fmt: skip
                cos = 1.0 if same else 0.0
            worst = min(worst, cos)
        return worst

    def combine(self, items: list[Item], facts: Facts) -> None:
        """Stage 3: the winners of each dimension together, re-measured with the best singles."""
        meas = facts.measured
        # Promising, not only significant: the screen's point estimate says faster. The final
        # stage re-measures every combination against the baseline, and only what is
        # significantly faster there can become the best.
        ok = {
            k: v
            for k, v in meas.items()
            if k != "baseline"
            and v.ratio < 1 - NOISE_BAND
            and not v.low >= 1  # NaN (too few rounds for an interval) stays promising
            and self._accurate(v)
        }
        if not ok:
            self.notes.append("no candidate was faster than the baseline in the screen")
            return
        changes = self._winning_settings(ok)
        model_items = [(k, v) for k, v in ok.items() if k.startswith("variant:")]
        by_key = {key: (mm, steps) for key, mm, _, steps in items}
        combined_cfg = self.cfg.with_(**changes)
        finals: list[Item] = [("baseline", self.m, self.cfg, [])]
        if changes:
            finals.append(("settings", self.m, combined_cfg, []))
        if model_items:
            vkey, _ = min(model_items, key=lambda kv: kv[1].ratio)
            mm, steps = by_key[vkey]
            level = max(combined_cfg.level, "extended", key=LEVEL_ORDER.index)
            finals.append(("combined", mm, combined_cfg.with_(level=level), steps))
        for key, _ in sorted(ok.items(), key=lambda kv: kv[1].ratio)[:2]:
            mm, steps = by_key[key]
            finals.append((f"{key}+final", mm, next(c for k, _, c, _ in items if k == key), steps))
        unique: dict[tuple[str, SessionConfig], Item] = {}
        for it in finals:
            unique.setdefault((str(it[1].path), it[2]), it)
        finals = list(unique.values())
        if len(finals) < 2:
            return
        if self.left() < 0:
            self.notes.append(
                "the combination of the screen's winners was not verified: the time budget was "
                "used up (raise budget_s)"
            )
            return
        self._verify(finals, facts)

    def _verify(self, finals: list[Item], facts: Facts) -> None:
        """Time the final candidates against the baseline (column 0) and record them with
        their output cosine; one whose outputs cannot be computed is a failure."""
        runs, rounds = self._plan(len(finals), facts, 0.6, "the combination")
        med, finals = self._time(finals, rounds, runs, "doctor: verify the combination")
        # per candidate, its rounds and the baseline's rounds of the same calls (extensions
        # time the baseline with the undecided candidates only)
        cols = {it[0]: (list(med[:, 0]), list(med[:, k])) for k, it in enumerate(finals)}
        self._settle(finals, cols, runs, facts)
        for key, mm, c, steps in finals[1:]:
            v = paired_ratio(*cols[key])
            p50 = float(np.median(cols[key][1]))
            outputs = self.outputs.get(key) or self.guarded(
                f"candidate {key} ({self._variant(mm)} · {c.label()})",
                "accuracy",
                functools.partial(self._outputs, mm, c),
            )
            if outputs is None:
                continue
            self.outputs[key] = outputs
            row = _measured(
                key,
                mm,
                c,
                steps,
                v,
                p50=p50,
                stage="final",
                against="baseline",
                variant=self._variant(mm),
            )
            facts.measured[key] = _with_cosine(row, self._cosine(key))

    def _settle(
        self,
        finals: list[Item],
        cols: dict[str, tuple[list[float], list[float]]],
        runs: int,
        facts: Facts,
    ) -> None:
        """While the budget allows, more interleaved rounds for the candidates whose interval
        is too wide to decide: it still allows a gain beyond the noise band and does not show
        one (a 0.69x [0.35, 1.30] is not "no faster"). Rounds add up per candidate, paired
        with the baseline's rounds of the same calls."""
        for _ in range(_MAX_EXTENSIONS):
            open_ = [it for it in finals[1:] if _undecided(paired_ratio(*cols[it[0]]))]
            if not open_:
                return
            items = [finals[0], *open_]
            per_round = len(items) * runs * max(facts.baseline_ms, 0.01) / 1e3
            rounds = min(int(self.left() * 0.9 / max(per_round, 1e-6)), 4 * MIN_ROUNDS)
            if rounds < 2:
                self.notes.append(
                    "undecided after the combination stage (its interval allows a gain and "
                    "does not show one): "
                    + ", ".join(it[0] for it in open_)
                    + "; the budget allowed no more rounds (raise budget_s)"
                )
                return
            more, ran = self._time(items, rounds, runs, "doctor: more rounds where undecided")
            if len(ran) != len(items):
                return  # a candidate failed this time: what was measured stands
            for k, it in enumerate(ran[1:], start=1):
                cols[it[0]][0].extend(more[:, 0])
                cols[it[0]][1].extend(more[:, k])
            self.notes.append(f"{rounds} more rounds for {', '.join(it[0] for it in open_)}: "
                              "their intervals were too wide to decide")  # fmt: skip

    def _winning_settings(self, ok: dict[str, Measured]) -> dict[str, Any]:
        """The fastest promising setting of each dimension (level, threads, spinning, IO)."""
        changes: dict[str, Any] = {}
        base = self.cfg.to_dict()
        for prefix in ("level:", "threads:", "spin:"):
            group = [v for k, v in ok.items() if k.startswith(prefix)]
            if group:
                best = min(group, key=lambda v: v.ratio)
                for name in ("level", "intra_op_threads", "allow_spinning"):
                    if best.config[name] != base[name]:
                        changes[name] = best.config[name]
        if "iobinding" in ok:
            changes["io_binding"] = True
        return changes

    def explain_slow(self, items: list[Item], facts: Facts) -> None:
        """Profile each slower model variant so the rules can say why it is slower (a variant
        that cannot be profiled is a failure, and the others are still explained)."""
        slow = [
            (key, mm, c)
            for key, mm, c, _ in items
            if key.startswith("variant:") and key in facts.measured and facts.measured[key].slower
        ]
        for key, mm, c in slow:
            what = f"profiling the slower {facts.measured[key].variant}"
            self.guarded(what, "explain", functools.partial(self._explain, key, mm, c, facts))

    def _explain(self, key: str, mm: Model, c: SessionConfig, facts: Facts) -> None:

        prof = profile(
            mm, c, self.feeds, runs=3, warmup=1, progress=False, timeout=self.call_timeout()
        )
        meas = facts.measured[key]
        v = Verdict(meas.ratio, meas.low, meas.high, meas.confidence, meas.rounds, NOISE_BAND)
        rows = [
            variant_row(
                k,
                model,
                label,
                base=self.m,
                verdict=(v, meas.verdict),
                lat=lat,
                outputs=[
                    self.outputs["baseline"],
                    self.outputs.get(key, self.outputs["baseline"]),
                ],
                data=data,
                synthetic=self.samples.synthetic,
            )
            for k, model, label, lat, data in (
                (0, self.m, "fp32", self.latencies["baseline"], self.profile.data),
                (1, mm, meas.variant, self.latencies[key], prof.data),
            )
        ]
        facts.variant_signals.extend(
            variant_signals([self.m, mm], rows, [self.profile.data, prof.data], c, cpu_flags())
        )

    def best(self, facts: Facts) -> Best:
        """The fastest accurate candidate that is significantly faster than the baseline; once
        the combination stage ran, only what held up when re-measured there counts."""

        if "baseline" not in facts.measured:  # a stage failed before the baseline was timed
            nan = float("nan")
            why = "the doctor stopped before it timed the baseline: nothing was compared"
            return Best(self.cfg.to_dict(), "original", str(self.m.path), [], 1.0, nan, nan, why,
                        1.0)  # fmt: skip
        ok = [v for v in facts.measured.values() if v.faster and self._accurate(v)]
        final_ran = any(v.stage == "final" for v in facts.measured.values())
        pool = [v for v in ok if v.stage == "final"] if final_ran else ok
        if not pool:
            base = facts.measured["baseline"]
            why = ("the screen's winners did not hold up when re-measured together with the "
                   "baseline" if final_ran else
                   "no candidate was measurably faster than the baseline")  # fmt: skip
            nan = float("nan")  # no interval: nothing was compared with the baseline itself
            return Best(base.config, "original", str(self.m.path), [], 1.0, nan, nan, why, 1.0)
        b = min(pool, key=lambda v: v.ratio)
        return Best(b.config, b.variant, b.model_path, b.steps, b.ratio, b.low, b.high,
                    b.verdict, b.cosine)  # fmt: skip


def _degenerate_notes(outputs: list[dict[str, np.ndarray]]) -> list[str]:
    """The float model's own outputs on the samples: NaN/Inf or all zeros make every
    accuracy figure against them meaningless, so say it."""
    out = []
    for name in outputs[0] if outputs else {}:
        forms = [scorable(o[name]) for o in outputs]
        if any(f.kind != "float" for f in forms):
            continue
        why = unscorable(np.concatenate([np.ravel(f.values) for f in forms]))
        if why:
            out.append(f"the model's own output {name!r} {why} on the samples: variant "
                       "accuracy against it cannot be scored")  # fmt: skip
    return out


def _base(items: list[Item], k: int, ref: int) -> int:
    """Model variants compare with the original at the variant config; the rest with the
    baseline."""
    return ref if items[k][0].startswith("variant:") else 0


def _wanted_quantization(
    share: dict[str, float], ops: dict[str, int] | None = None
) -> list[tuple[str, Any]]:
    """Variants worth trying: static QDQ per-channel int8 when convolutions carry the time;
    dynamic int8 when MatMul/Gemm/attention do, and weight-only int4 (MatMulNBits) too when
    the model has MatMul nodes (their constant weights are what it quantizes)."""

    conv = sum(v for k, v in share.items() if "Conv" in k)
    matmul = sum(v for k, v in share.items() if "MatMul" in k or "Gemm" in k or "Attention" in k)
    wanted: list[tuple[str, Any]] = []
    if conv >= 0.4:
        qc = QuantConfig(mode="static", format="qdq", per_channel=True, calibration_size=16)
        wanted.append(("static", qc))
    if matmul >= 0.3:
        wanted.append(("dynamic", QuantConfig(mode="dynamic")))
        if ops and ops.get("MatMul"):
            wanted.append(("int4", QuantConfig(mode="int4")))
    return wanted


def _failure_text(err: BaseException) -> str:
    """ortlab's own message (it names the step and ORT's words), else ``Type: first line`` —
    never an empty string, whatever the exception holds."""
    text = str(err).strip()
    if isinstance(err, OrtlabError) and text:
        return text[:2000]
    return error_text(err, 2000)


BUDGET_SLACK = 0.2
"""A call may run this fraction of the budget past it (the doctor's promise: budget + 25 %)."""
_MAX_EXTENSIONS = 3
"""Extensions of the combination stage for undecided candidates (each up to 24 rounds)."""


def _undecided(v: Verdict) -> bool:
    """An interval that allows a gain beyond the noise band without showing one."""
    return v.enough and not v.significant and v.low < 1 - NOISE_BAND and v.ratio < 1


def _clearly_slower(med: np.ndarray, base: int, k: int) -> bool:
    """Column ``k`` is significantly slower than column ``base`` (pruned after the screen)."""
    v = paired_ratio(med[:, base], med[:, k])
    return v.significant and v.ratio > 1


def _quant_args(qc: Any) -> str:
    if qc.mode in ("dynamic", "int4"):
        return f"mode={qc.mode!r}"
    return f"mode='static', format={qc.format!r}, per_channel={qc.per_channel!r}"


def _describe(v: Any) -> str:
    """A user variant in words: its name or file name."""
    if isinstance(v, Model):
        return v.name
    if isinstance(v, str | os.PathLike):
        return Path(os.fspath(v)).name
    return type(v).__name__


def _measured(
    key: str,
    mm: Model,
    c: SessionConfig,
    steps: list[str],
    v: Any,
    *,
    p50: float,
    stage: str,
    against: str,
    variant: str,
) -> Measured:
    label = c.label() if variant == "original" else f"{variant} · {c.label()}"
    return Measured(
        key=key,
        label=label,
        variant=variant,
        model_path=str(mm.path),
        config=c.with_(fallback="warn").to_dict(),
        p50_ms=p50,
        ratio=v.ratio,
        low=v.low,
        high=v.high,
        significant=v.significant,
        verdict="baseline" if key == "baseline" else v.text(against, label),
        cosine=float("nan"),
        file_bytes=mm.path.stat().st_size,
        stage=stage,
        steps=list(steps),
        rounds=v.rounds,
        confidence=v.confidence,
    )


def _with_cosine(m: Measured, cosine: float) -> Measured:
    import dataclasses

    return dataclasses.replace(m, cosine=cosine)


def _symbolic_inputs(m: Model, cfg: SessionConfig) -> dict[str, list[str]]:
    fixed = dict(cfg.free_dimension_overrides)
    out = {}
    for t in m.inputs:
        names = [d for d in (t.shape or []) if isinstance(d, str) and d not in fixed]
        if names:
            out[t.name] = names
    return out
