"""llama-bench's own outputs of ``ortlab.llm_bench`` (its ``-o md|csv|json|jsonl|sql``), each
a registered renderer of :class:`LLMBenchResult`. ``more``: the results of further models,
written into the same table, list or statements, as llama-bench writes ``-m a -m b``."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ortlab.analysis.generation.benchrow import DEFAULT_N_UBATCH
from ortlab.core.units import fmt_bytes, fmt_pm

if TYPE_CHECKING:
    from ortlab.analysis.generation.bench import LLMBenchResult

__all__ = ["bench_csv", "bench_json", "bench_jsonl", "bench_md", "bench_sql"]


def _records(r: LLMBenchResult, more: Sequence[LLMBenchResult]) -> list[dict[str, object]]:
    return [x for one in (r, *more) for x in one.records()]


def bench_json(r: LLMBenchResult, more: Sequence[LLMBenchResult] = ()) -> str:
    """A list of records with llama-bench's field names (``-o json``)."""
    return json.dumps(_records(r, more), indent=2, allow_nan=True)


def bench_jsonl(r: LLMBenchResult, more: Sequence[LLMBenchResult] = ()) -> str:
    """One record a line (``-o jsonl``)."""
    return "\n".join(json.dumps(x, allow_nan=True) for x in _records(r, more))


def bench_csv(r: LLMBenchResult, more: Sequence[LLMBenchResult] = ()) -> str:
    """A header and a line per record, a list of samples space-separated (``-o csv``)."""
    records = _records(r, more)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(records[0]) if records else [])
    writer.writeheader()
    for x in records:
        writer.writerow(
            {k: " ".join(map(str, v)) if isinstance(v, list) else v for k, v in x.items()}
        )
    return out.getvalue().rstrip("\n")


def bench_sql(r: LLMBenchResult, more: Sequence[LLMBenchResult] = ()) -> str:
    """``-o sql``: a table named test with a column per field (TEXT, INTEGER or REAL; a list
    of samples as TEXT, space-separated as in csv) and one INSERT per record, for sqlite3.
    Text is quoted SQL's way (a quote doubled), so a model's name cannot end a statement."""

    def kind(v: object) -> str:
        if isinstance(v, bool | int):
            return "INTEGER"
        return "REAL" if isinstance(v, float) else "TEXT"

    def value(v: object) -> str:
        if isinstance(v, bool):
            return str(int(v))
        if isinstance(v, float):
            return repr(v) if math.isfinite(v) else "NULL"
        if isinstance(v, int):
            return str(v)
        text = " ".join(map(str, v)) if isinstance(v, list) else str(v)
        return "'" + text.replace("'", "''") + "'"

    records = _records(r, more)
    if not records:
        return ""
    names = list(records[0])
    columns = ",\n".join(f"  {k} {kind(records[0][k])}" for k in names)
    lines = [f"CREATE TABLE IF NOT EXISTS test (\n{columns}\n);", ""]
    lines += [
        f"INSERT INTO test ({', '.join(names)}) VALUES ({', '.join(value(x[k]) for k in names)});"
        for x in records
    ]
    return "\n".join(lines)


def bench_md(r: LLMBenchResult, more: Sequence[LLMBenchResult] = ()) -> str:
    """llama-bench's markdown table: model, size, params, backend, threads, n_batch (and
    n_ubatch and the sequences where any row differs from the defaults), test (with the
    depth where any), t/s as mean ± standard deviation."""
    rows = [(one, row) for one in (r, *more) for row in one.rows]
    ub = any(row.n_ubatch != DEFAULT_N_UBATCH for _, row in rows)
    seq = any(row.n_seq != 1 for _, row in rows)
    head = ["model", "size", "params", "backend", "threads", "n_batch"]
    head += ["n_ubatch"] * ub + ["n_seq"] * seq + ["test", "t/s"]
    lines = [
        "| " + " | ".join(head) + " |",
        "| " + " | ".join(["---"] * 5 + ["---:"] * (len(head) - 5)) + " |",
    ]
    for one, row in rows:
        providers = one.config.providers or ("CPU",)
        backend = ",".join(p.removesuffix("ExecutionProvider").upper() for p in providers)
        n = one.params
        params = f"{n / 1e6:.2f} M" if n < 1e9 else f"{n / 1e9:.2f} B"
        cells = [one.model, fmt_bytes(one.size_bytes), params, backend, str(row.n_threads)]
        cells += [str(row.n_batch)] + [str(row.n_ubatch)] * ub + [str(row.n_seq)] * seq
        cells += [row.label, fmt_pm(row.avg_ts, row.stddev_ts)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
