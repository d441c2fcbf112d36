"""The doctor's search: observe the session, build candidate fixes, time them interleaved with
the baseline (screen, prune, measure survivors), score the variants' accuracy and fix the
inaccurate int8 ones, then combine the winners and verify the combination
(:mod:`ortlab.diagnosis.verify`); the rows go to the ledger (:mod:`ortlab.diagnosis.ledger`).

Stages, each in the worker and each bounded by the budget:

1. observe: profile the baseline (op time shares, profiler overhead), placement when an
   accelerator EP loaded;
2. candidates (:mod:`ortlab.diagnosis.candidates`): settings worth timing and model variants
   worth building;
3. screen: 6 interleaved rounds of everything (the fewest a 95 % interval needs, see
   :data:`ortlab.core.stats.MIN_ROUNDS`); candidates whose whole interval is slower than the noise
   band are pruned; the survivors get more rounds (paired per round, so rounds from both calls
   pool);
4. combine (:mod:`ortlab.diagnosis.verify`): the fastest significant setting per dimension
   plus the best accurate variant, timed again against the baseline with the two best single
   changes.

A candidate that fails — its variant cannot be built (ORT's quantizer raises ``ValueError``,
``AssertionError``…), its session cannot be built or its first run fails in the worker — is
recorded as a :class:`~ortlab.diagnosis.facts.CandidateFailure` (a finding) and left out; the
others go on.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ortlab.analysis.limits.roofline import profile_with_roofline
from ortlab.analysis.memory import footprint, memory_settings
from ortlab.analysis.optimizers.levels import initializer_input_blocker
from ortlab.analysis.placement.measure import placement
from ortlab.analysis.placement.whatif import whatif
from ortlab.analysis.placement.whatifresult import DEFAULT_TARGETS, TARGETS
from ortlab.analysis.quantization.error import QuantFix, quantization_error
from ortlab.analysis.quantization.metrics import degenerate_notes
from ortlab.analysis.quantization.quantize import calibration_data
from ortlab.analysis.quantization.variants import explain_variant
from ortlab.core.config import SessionConfig
from ortlab.core.eps import compiling
from ortlab.core.inputs import unfixed_dims
from ortlab.core.machine import physical_cores
from ortlab.core.model import Model
from ortlab.core.onnx_util import compute_in_bodies
from ortlab.core.stats import MIN_ROUNDS, paired_ratio
from ortlab.diagnosis.best import Best, best_of
from ortlab.diagnosis.budget import (
    MEMORY_REPEATS,
    fit_screen,
    memory_need_s,
    memory_plan,
)
from ortlab.diagnosis.candidates import (
    setting_candidates,
    variant_candidates,
    variant_config,
)
from ortlab.diagnosis.facts import (
    QUANTIZED,
    Candidate,
    CandidateKey,
    FixTried,
    Kind,
    Measured,
    Observed,
    TransformerFusion,
    baseline_ms,
    measured_row,
    with_cosine,
)
from ortlab.diagnosis.ledger import Item
from ortlab.diagnosis.verify import FinalStage

__all__ = ["Search"]

QUANT_FIX_NODES = 5
"""The worst nodes (lowest SQNR) an int8 fix spares."""
_FIX_KINDS = (("spare", "left in float"), ("16bit", "their outputs quantized to 16 bits"))
"""The variants ``ErrorResult.fix`` makes, in its order: key tag, how the nodes are spared."""
WHATIF_TARGETS = {t: TARGETS[t] for t in DEFAULT_TARGETS}
"""What-if targets by the EP they predict."""


class Search(FinalStage):
    """The doctor's stages over one run's ledger (:class:`~ortlab.diagnosis.ledger.Ledger`):
    observe, memory, candidates, screen, accuracy, quantization fixes, explain; the final
    combination is :class:`~ortlab.diagnosis.verify.FinalStage`'s."""

    # -- observe ----------------------------------------------------------------

    def observe(self) -> Observed:
        """Profile the baseline; the placement join when an accelerator EP loaded; the what-if
        partition of a requested NPU EP that did not load here."""
        m, cfg = self.m, self.cfg
        pl = None
        if compiling(cfg.providers, cfg.policy):  # no roofline: the placement's profile is it
            pl = placement(m, cfg, self.feeds, runs=5, progress=False, timeout=self.call_timeout())
            assert pl.profile is not None  # a measured placement keeps its profile
            prof, roof = pl.profile, None
        else:
            prof, roof = profile_with_roofline(
                m, cfg, self.feeds, runs=5, warmup=2, timeout=self.call_timeout()
            )
        self.profile = prof
        report = prof.report
        assert report is not None  # profile() always attaches the session's report
        shares = prof.by_op_type().groupby("op_type")["share"].sum().to_dict()
        accelerated = any(p != "CPUExecutionProvider" for p in report.active)
        if pl is None and accelerated:  # the roofline's session cannot be the placement's
            pl = placement(m, cfg, self.feeds, runs=3, progress=False, timeout=self.call_timeout())
        elif not accelerated:
            pl = None  # one EP ran it all: no join to read
        mem = prof.memory()
        allocator = (
            {
                "arena_bytes": float(mem["arena_bytes"].iloc[-1]),
                "peak_bytes": float(mem["peak_bytes"].max()),
            }
            if len(mem)
            else {}
        )
        symbolic = unfixed_dims(m, cfg.free_dimension_overrides)
        predicted, predicted_fixed = self._predict(report.missing, bool(symbolic))
        return Observed(
            model_name=m.name,
            requested=cfg,
            report=report,
            op_counts=dict(m.summary.op_types),
            profiled_ms=float(np.median(prof.data.run_us)) / 1e3,
            symbolic_inputs=symbolic,
            op_time_share={str(k): float(v) for k, v in shares.items()},
            placement=pl,
            initializer_blocker=initializer_input_blocker(m),
            compute_in_bodies=compute_in_bodies(m.proto.graph),
            cores=physical_cores(),
            min_cosine=self.min_cosine,
            allocator=allocator,
            predicted=predicted,
            predicted_fixed=predicted_fixed,
            roofline=roof,
        )

    def memory(self) -> Any:
        """The session's resident memory and each memory setting's, in fresh processes; the
        settings that lower the peak enough to matter are then timed like any candidate."""
        if self.left() < 0:
            self.skip("the memory footprint was not measured: the time budget was used up")
            return None
        d = self.profile.data
        plan = (
            1 + len(memory_settings(self.cfg)),
            d.session_init_us / 1e6,
            float(np.median(d.run_us)) / 1e6,
        )
        why = memory_plan(*plan, self.budget_s)
        if why:
            self.skip(why, memory_need_s(*plan))
            return None
        return self.guarded(
            "the memory footprint",
            "memory",
            lambda: footprint(
                self.m,
                self.cfg,
                self.feeds,
                repeats=MEMORY_REPEATS,
                runs=2,
                progress=False,
                timeout=self.call_timeout(),
            ),
            "ortlab.footprint(model)",
        )

    def _predict(self, missing: Sequence[Any], symbolic: bool) -> tuple[Any, Any]:
        """A requested NPU EP that does not run here (QNN, NNAPI, CoreML, OpenVINO): predict
        its partition with ``ortlab.whatif`` (its real compiler where one runs without the
        device), as exported and at the timed shapes, so the rules can say why nodes fall
        back and what fixing the shapes gains. (None, None) when none was requested."""
        eps = [i.provider.split(":")[0] for i in missing]
        targets = [t for t, ep in WHATIF_TARGETS.items() if ep in eps]
        if not targets:
            return None, None
        predicted = self.guarded(
            f"the what-if partition for {', '.join(targets)}",
            "observe",
            lambda: whatif(self.m, targets, progress=False, timeout=self.call_timeout()),
        )
        if predicted is None or not symbolic:
            return predicted, None
        return predicted, self.guarded(
            "the what-if partition at the timed shapes",
            "observe",
            lambda: whatif(
                self.m, targets, feeds=self.feeds, progress=False, timeout=self.call_timeout()
            ),
        )

    # -- candidates -------------------------------------------------------------

    def candidates(
        self,
        seen: Observed,
        user_variants: Sequence[Any],
        *,
        footprint: Any = None,
        quantize: bool,
        transformers: bool,
    ) -> tuple[list[Item], TransformerFusion]:
        """The baseline, the settings worth timing and the model variants worth building
        (:mod:`ortlab.diagnosis.candidates`), and what the transformers optimizer fused."""
        items = setting_candidates(self.m, self.cfg, seen, footprint)
        ref = variant_config(self.cfg)
        built, fusion = variant_candidates(
            self.m,
            seen,
            user_variants,
            budget=self,
            feeds=self.feeds,
            notes=self.notes,
            quantize=quantize,
            transformers=transformers,
        )
        return items + [Candidate(k, variant, ref, steps) for k, variant, steps in built], fusion

    def variant_config(self) -> SessionConfig:
        return variant_config(self.cfg)

    # -- measuring --------------------------------------------------------------

    def _fit(self, items: list[Item], seen: Observed, share: float) -> list[Item]:
        """The candidates that get a verdict's rounds in ``share`` of what is left (see
        :func:`~ortlab.diagnosis.budget.fit_screen`); the others are said once, as skipped."""
        per_run = max(baseline_ms(seen, self.measured), 0.01) / 1e3
        build, floor = seen.report.create_ms / 1e3, 2 if per_run >= 0.02 else 3
        kept = fit_screen(items, per_run, build, self.left() * share, floor)
        if len(kept) < len(items):
            out = [it.key for it in items if it.key not in {k.key for k in kept}]
            each = build + MIN_ROUNDS * floor * per_run
            what = f"{', '.join(out)} not timed ({len(kept)} of {len(items)} fit the screen)"
            self.skip(what, self.budget_s - self.left() + len(items) * each / share)
        return kept

    def screen(self, items: list[Item], seen: Observed) -> list[Item]:
        """Stage 1: every candidate, MIN_ROUNDS rounds; stage 2: the survivors, more rounds.
        Returns the candidates that ran (the failed ones are left out)."""
        items = self._fit(items, seen, 0.35)
        runs, rounds = self._plan(len(items), seen, 0.35, "the screen")
        self.runs = runs
        first_n = min(rounds, MIN_ROUNDS)
        first, items = self._time(items, first_n, runs, f"doctor: screen {len(items)} candidates")
        ref = self._ref_index(items)
        medians = {it[0]: list(first[:, k]) for k, it in enumerate(items)}
        slower = [
            items[k][0]
            for k in range(len(items))
            if k not in (0, ref)
            and paired_ratio(first[:, _base(items, k, ref)], first[:, k]).slower
        ]
        if slower:
            self.notes.append("pruned after the screen (clearly slower): " + ", ".join(slower))
        keep = [it for it in items if it[0] not in slower]
        more = rounds - first_n if len(keep) > 1 else 0
        self.rounds = first_n
        if more > 0 and self.left() <= 0:
            self.skip("more rounds for the survivors of the screen (no time left)")
        elif more > 0:
            second, ran = self._time(keep, more, runs, "doctor: measure survivors")
            for j, (key, *_) in enumerate(ran):
                medians[key].extend(second[:, j])
            lost = {it[0] for it in keep} - {it[0] for it in ran}
            items = [it for it in items if it[0] not in lost]
            self.rounds += more
        self._record_screen(items, medians)
        return items

    def _record_screen(self, items: list[Item], medians: dict[str, list[float]]) -> None:
        ref = self._ref_index(items)
        for k, (key, mm, c, steps) in enumerate(items):
            b = _base(items, k, ref)
            base = medians[items[b][0]]
            n = min(len(medians[key]), len(base))  # pruned ones stop after the first rounds
            v = paired_ratio(base[:n], medians[key][:n])
            p50 = float(np.median(np.asarray(self.latencies[key]) / 1e6))
            self.measured[key] = measured_row(
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

    def _ref_index(self, items: list[Item]) -> int:
        ref = self.variant_config()
        for k, it in enumerate(items):
            if it.model is self.m and it.config == ref and not it.parsed.is_sweep:
                return k
        return 0

    def accuracy(self, items: list[Item], eval_data: Any) -> None:
        """Output cosine of every model variant against the original, on the same samples."""

        # At the shapes that are timed: the feeds' own (the caller's first), never defaults.
        self.samples = calibration_data(self.m, eval_data, limit=4, seed=100, like=self.feeds)
        self.outputs["baseline"] = self._outputs(self.m, self.cfg)
        self.notes += degenerate_notes(self.outputs["baseline"])
        self.notes += [self.m.random_note()] if self.m.random_ops else []
        for key, mm, c, _ in items:
            if mm is self.m or key not in self.measured:
                continue
            got = self.guarded(
                f"the accuracy of {key}", "accuracy", functools.partial(self._outputs, mm, c)
            )
            if got is None:  # the variant does not run on the samples: never the best
                self.measured[key] = with_cosine(self.measured[key], 0.0)
                continue
            self.outputs[key] = got
            self.measured[key] = with_cosine(self.measured[key], self._cosine(key))

    def fix_quantization(self, items: list[Item], seen: Observed) -> list[Item]:
        """For each int8 variant below ``min_cosine``: the variants that spare its worst nodes
        (``quantization_error(...).fix``), timed interleaved with the original and the full
        variant, and scored on the same samples. Returns ``items`` with the fixes added, so
        the combination stage can pick one like any candidate."""
        low = [
            it
            for it in items
            if it.parsed.is_variant
            and it.parsed.arg in QUANTIZED
            and it.key in self.measured
            and not self.accurate(self.measured[it.key])
        ]
        for key, q, c, _ in low:
            if self.left() < 0:
                self.skip(f"a fix for {key} (the time budget was used up)")
                break
            fix = self.guarded(
                f"sparing the worst nodes of {key}",
                "build",
                functools.partial(self._quant_fix, q),
                f"ortlab.quantization_error(model, q).fix(n={QUANT_FIX_NODES})",
            )
            if fix is None:
                continue
            fixes: list[Item] = []
            spared: dict[str, str] = {}
            for (tag, how), v in zip(_FIX_KINDS, fix.variants, strict=False):
                fkey = f"{key}-{tag}{len(fix.nodes)}"
                fixes.append(Candidate(fkey, v, c, list(v.variant.steps)))
                spared[fkey] = how
            self.quant_fixes[key] = FixTried(list(fix.nodes), spared)
            ref = Candidate(Kind.ORIGINAL.value, self.m, c, [])
            runs, rounds = self._plan(len(fixes) + 2, seen, 0.15, f"the fixes of {key}")
            med, ran = self._time(
                [ref, Candidate(key, q, c, []), *fixes], rounds, runs, f"doctor: fixes of {key}"
            )
            for j, (fkey, v, fc, steps) in enumerate(ran[2:], start=2):
                row = measured_row(
                    fkey,
                    v,
                    fc,
                    steps,
                    paired_ratio(med[:, 0], med[:, j]),
                    p50=float(np.median(np.asarray(self.latencies[fkey]) / 1e6)),
                    stage="screen",
                    against="the original",
                    variant=v.name,
                )
                got = self.guarded(
                    f"the accuracy of {fkey}", "accuracy", functools.partial(self._outputs, v, fc)
                )
                if got is not None:
                    self.outputs[fkey] = got
                self.measured[fkey] = with_cosine(row, self._cosine(fkey) if got else 0.0)
                items.append(Candidate(fkey, v, fc, steps))
        return items

    def _quant_fix(self, q: Model) -> QuantFix:
        err = quantization_error(self.m, q, feeds=self.feeds, limit=4, timeout=self.call_timeout())
        return err.fix(n=QUANT_FIX_NODES, timeout=self.call_timeout())

    def explain_slow(self, items: list[Item]) -> list[Any]:
        """Profile each slower model variant so the rules can say why it is slower (a variant
        that cannot be profiled is a failure, and the others are still explained): the
        ``ortlab.analysis.quantization.variants.Signal`` objects."""
        slow = [
            (key, mm, c)
            for key, mm, c, _ in items
            if CandidateKey.parse(key).is_variant
            and key in self.measured
            and self.measured[key].slower
        ]
        signals: list[Any] = []
        for key, mm, c in slow:
            what = f"profiling the slower {self.measured[key].variant}"
            signals += (
                self.guarded(what, "explain", functools.partial(self._explain, key, mm, c)) or []
            )
        return signals

    def _explain(self, key: str, mm: Model, c: SessionConfig) -> list[Any]:
        meas = self.measured[key]
        p = meas.paired
        v = p.as_verdict()
        return list(
            explain_variant(
                self.m,
                mm,
                c,
                self.feeds,
                verdict=(v, p.verdict),
                label=meas.variant,
                latencies=(self.latencies["baseline"], self.latencies[key]),
                outputs=(self.outputs["baseline"], self.outputs.get(key, self.outputs["baseline"])),
                base_profile=self.profile.data,
                synthetic=self.samples.synthetic,
                timeout=self.call_timeout(),
            )
        )

    def best(self, measured: dict[str, Measured]) -> Best:
        """The fastest accurate candidate significantly faster than the baseline
        (:func:`~ortlab.diagnosis.best.best_of`)."""
        return best_of(measured, self.cfg, str(self.m.path), self.accurate)


def _base(items: list[Item], k: int, ref: int) -> int:
    """Model variants compare with the original at the variant config; the rest with the
    baseline."""
    return ref if items[k].parsed.is_variant else 0
