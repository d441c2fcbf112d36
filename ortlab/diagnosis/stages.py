"""The doctor's stages run in order (memory, generation, build, screen, CPU cost, accuracy,
quantization fix, combine, explain): each a function that returns its
:class:`~ortlab.diagnosis.outcome.Outcome`, folded into the facts so far as it ends; each named
to the progress as it starts; the budget or an ortlab error ending the plan there with what the
stages before it measured kept (the failed stage's own notes and failures too, not its partial
facts); a cancel from the user ending the doctor."""

from __future__ import annotations

from collections.abc import Callable

from ortlab.core.errors import OrtlabError, WorkerCancelledError, WorkerTimeoutError, error_text
from ortlab.core.run import Run
from ortlab.diagnosis.budget import Budget, BudgetSpentError
from ortlab.diagnosis.facts import CandidateFailure, Facts
from ortlab.diagnosis.outcome import Stage

__all__ = ["run_plan", "said_stage"]

Plan = list[tuple[str, Stage]]


def run_plan(
    plan: Plan,
    start: tuple[Run, Budget, Facts],
    done: Callable[[str], None],
    progress: bool | Callable[[int, int], None],
) -> Facts:
    """Each stage of ``plan`` in turn on ``start``'s run and budget, each reading the facts
    the stages before it left and its outcome folded as it ends; the facts after the last.
    ``done(name)`` after each (its time is the stage's). The progress hears each stage's name
    (:func:`said_stage`; ``True``: a bar of the stages, named as each starts, above the bars
    of its calls)."""
    if progress is not True:
        return _each(plan, start, done, lambda name, k, n: said_stage(progress, name, k, n))
    from tqdm.auto import tqdm

    bar = tqdm(total=len(plan), desc="doctor", unit="stage", leave=False)
    try:

        def tell(name: str, k: int, n: int) -> None:
            bar.set_description(f"doctor: {name}")
            bar.total, bar.n = n, k
            bar.refresh()

        return _each(plan, start, done, tell)
    finally:
        bar.close()


def said_stage(progress: bool | Callable[[int, int], None], name: str, k: int, n: int) -> None:
    """Stage ``k`` of ``n``, ``name``, starting, said to a progress callback: one with a
    ``stage`` method (the Lab's bar) is given the name, so the counts the stage's own calls
    report after it read as that stage's ('doctor: screen 3/12'); then it hears ``(k, n)``,
    the stages done of all."""
    if not callable(progress):
        return
    named = getattr(progress, "stage", None)
    if callable(named):
        named(name)
    progress(k, n)


def _each(
    plan: Plan,
    start: tuple[Run, Budget, Facts],
    done: Callable[[str], None],
    tell: Callable[[str, int, int], None],
) -> Facts:
    run, budget, facts = start
    for k, (name, stage) in enumerate(plan):
        tell(name, k, len(plan))
        spend = budget.for_stage()
        try:
            facts = stage(run, spend, facts).folded()
        except WorkerCancelledError:
            raise
        except BudgetSpentError:  # not a failure: the budget ended the search here
            spend.skip(f"the {name} stage and those after it (the budget and its slack were spent)")
            facts = facts.heard(spend.said)  # its own notes and failures: its facts are lost
            done(name)
            break
        except OrtlabError as err:  # keep what the stages before it measured
            if isinstance(err, WorkerTimeoutError) and budget.cut_short(err):
                spend.skip(  # the budget stopped a call: said with the budget to ask for
                    f"the {name} stage and those after it (a call did not finish in the time "
                    "the budget left it)"
                )
            else:
                spend.failed(CandidateFailure(f"the {name} stage", error_text(err, 2000), name))
                spend.note(
                    f"the doctor stopped at its {name} stage ({error_text(err, 300)}); the "
                    "findings above come from the stages before it"
                )
            facts = facts.heard(spend.said)
            done(name)
            break
        done(name)
    return facts
