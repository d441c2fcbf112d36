"""Every tab of the Lab as a person first sees it, in JupyterLab in Chromium at 1280x800 and
1920x1080, on a real export it was not built on (the PP-OCRv4 recognizer of the corpus, at
48x320), with another process keeping the second core busy: no control clipped or outside the
Lab, no sideways scrollbar (a box whose content is wider than it, a table wider than the Lab),
no text drawn under 10 px, and one time per node (the Profile tab's top node and the graph's
details for it agree). Screenshots of each tab at each size go to the artifacts folder
(``docs/screens/`` holds them)."""

from __future__ import annotations

import json
import os
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests import corpus
from tests.models import busy_core
from tests.ui.lab import jupyterlab, no_console_errors, open_lab, wait_idle, write_notebook

pytestmark = [pytest.mark.ui, pytest.mark.slow]

SIZES = [(1280, 800), (1920, 1080)]
DIMS = {"?": 48, "p2o.DynamicDimension.1": 320}
# the tabs of a model without a decoder, in order (a decoder's Lab adds Generate)
TABS = ["Overview", "Graph", "Placement", "Profile", "Benchmark"]
TABS += ["Optimization", "Quantization", "Limits", "Doctor", "History"]

_PROBLEMS = """() => {
  const lab = document.querySelector('.ortlab-lab');
  const edge = lab.getBoundingClientRect().right + 1;
  const out = [];
  const shown = (el) => el.offsetParent !== null && el.getClientRects().length > 0;
  const what = (el) => (el.innerText || el.value || el.getAttribute('title') || el.tagName)
    .trim().slice(0, 60);
  // controls: their text fits (a cut label or value) and they stay inside the Lab
  for (const el of lab.querySelectorAll(
      'button, input[type=text], .widget-label, .widget-readout, .lm-TabBar-tabLabel')) {
    if (!shown(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0) continue;
    if (el.scrollWidth > el.clientWidth + 1) out.push('clipped: ' + what(el));
    if (r.right > edge) out.push('outside the Lab: ' + what(el));
  }
  // scrollbars: Playwright's Chromium hides them, so look for what would show one — a box
  // that scrolls sideways (its content wider than it) and a table wider than the Lab
  for (const el of lab.querySelectorAll('*')) {
    if (!shown(el) || el.closest('.ortlab-graph, .js-plotly-plot')) continue;
    const style = getComputedStyle(el);
    const scrolls = ['auto', 'scroll'].includes(style.overflowX);
    if (scrolls && el.scrollWidth > el.clientWidth + 1)
      out.push('sideways scrollbar: ' + (el.getAttribute('class') || el.tagName).slice(0, 60)
               + ' ' + what(el).slice(0, 30));
    if (el.tagName === 'TABLE' && el.getBoundingClientRect().right > edge)
      out.push('table wider than the Lab: ' + what(el).slice(0, 40));
  }
  // text: every element holding text directly, HTML and SVG, at 10 px or more on screen
  const walker = document.createTreeWalker(lab, NodeFilter.SHOW_TEXT);
  const seen = new Set();
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    const el = t.parentElement;
    if (!t.textContent.trim() || seen.has(el) || !shown(el)) continue;
    seen.add(el);
    if (el.closest('.modebar, .ortlab-graph-mini')) continue;  // icons, the minimap
    let px = parseFloat(getComputedStyle(el).fontSize);
    if (el instanceof SVGElement && el.getScreenCTM) {
      const m = el.getScreenCTM();
      if (m) px *= Math.hypot(m.a, m.b);  // the zoom it is drawn at
    }
    if (px < 9.95) out.push(`text at ${px.toFixed(1)} px in ${el.tagName} ` +
      `${el.getAttribute('class') || ''}: ` + t.textContent.trim().slice(0, 40));
  }
  return [...new Set(out)];
}"""


def _open_tab(page: Any, name: str) -> None:
    page.locator(".ortlab-lab .lm-TabBar-tab", has_text=name).first.click()
    page.wait_for_timeout(400)


def _look(
    page: Any,
    tab: str,
    size: tuple[int, int],
    chart: bool,
    artifacts: Path,
    problems: dict[str, list[str]],
) -> None:
    """Open ``tab`` (waiting for its chart to be drawn), screenshot it at ``size`` and record
    what reads badly (:data:`_PROBLEMS`)."""
    _open_tab(page, tab)
    if chart:
        page.wait_for_function(
            "() => [...document.querySelectorAll('.ortlab-lab .js-plotly-plot "
            ".main-svg')].some(e => e.closest('.js-plotly-plot').offsetParent)",
            timeout=60_000,
        )
    page.locator(".ortlab-lab").scroll_into_view_if_needed()
    width, height = size
    page.screenshot(path=str(artifacts / f"lab_{tab.lower()}_{width}x{height}.png"))
    found = page.evaluate(_PROBLEMS)
    if found:
        problems[f"{tab} at {width}x{height}"] = found


def _wait_text(page: Any, text: str, timeout: float = 240_000) -> None:
    page.wait_for_function(
        "t => document.querySelector('.ortlab-lab').innerText.includes(t)",
        arg=text,
        timeout=timeout,
        polling=250,  # not every frame: layout of the whole Lab 60 times a second takes a core
    )


def test_every_tab_reads_at_both_sizes(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    model = corpus.path("ppocrv4_rec")
    root = tmp_path / "root"
    root.mkdir()
    cells = [
        f"import os; os.environ['ORTLAB_CACHE_DIR'] = {os.environ['ORTLAB_CACHE_DIR']!r}",
        # the recognizer's height is 48 (its width free): what a person types after the first
        # error names the guessed dims (its H is a dim named '?', guessed 224 from its place)
        f"import ortlab\nlab = ortlab.Lab({str(model)!r}, runs=10, dims={DIMS!r})\n"
        "lab.budget.value = 10\nlab",
    ]
    write_notebook(root / "screens.ipynb", cells)
    problems: dict[str, list[str]] = {}
    # as on a shared laptop or server: another process keeps the second core busy throughout
    with busy_core(), jupyterlab(root, tmp_path / "home") as handle:
        context, page = open_lab(browser, handle, "screens.ipynb", *SIZES[0])
        _open_tab(page, "History")
        _wait_text(page, "cpu · all")
        wait_idle(page)
        # the tabs that run on a click: run them once, then look at every tab at each size
        for tab, button, done in [
            ("Optimization", "Run optimization diff", "original nodes"),
            ("Quantization", "Compare original", "time vs original"),
            ("Quantization", "Where do the numbers change", "Tensors around it"),
            ("Limits", "Roofline: nodes against", "Ceilings (measured with ORT"),
            ("Doctor", "Run the doctor", "Best verified"),
        ]:
            _open_tab(page, tab)
            page.locator(".ortlab-lab button", has_text=button).click()
            try:
                _wait_text(page, done)
            except Exception:
                page.screenshot(path=str(artifacts / f"lab_{tab.lower()}_stuck.png"))
                raise
            wait_idle(page)
        for width, height in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            for tab in TABS:
                chart = tab in ("Profile", "Benchmark", "Limits", "History")
                _look(page, tab, (width, height), chart, artifacts, problems)
        # one time per node: the Profile tab's top node, picked, opens the graph on it; the
        # details panel shows the same kernel time the list shows
        _open_tab(page, "Profile")
        select = page.locator(".ortlab-lab .ortlab-top-nodes select")
        first = select.first.locator("option").first.inner_text()
        select.first.select_option(index=0)
        details = page.locator(".ortlab-lab .ortlab-details >> visible=true")  # the Graph tab's
        details.wait_for(state="visible", timeout=60_000)
        panel = details.inner_text()
        no_console_errors(page)
        context.close()
    listed = re.search(r"(\d+)\s*[µμ]s\b", first)
    assert listed, first
    shown = [float(x) for x in re.findall(r"([\d.]+)\s*[µμ]s/run", panel)]
    assert any(round(x) == int(listed.group(1)) for x in shown), f"{first!r} vs {panel!r}"
    assert not problems, json.dumps(problems, indent=1, ensure_ascii=False)


_DECODE = re.compile(r"decode ([\d,.]+) tokens/s \[([\d,.]+), ([\d,.]+)\]")


def _decode(text: str) -> tuple[float, float, float]:
    """The Generate tab's headline decode tokens/s: (median, low, high)."""
    found = _DECODE.search(text[text.index("Generate (TTFT") :])
    assert found, text[:2000]
    return tuple(float(x.replace(",", "")) for x in found.groups())  # type: ignore[return-value]


_THREADS = 1
"""Both sides of the tab-against-script check run one intra-op thread. With two threads on
two cores and a core kept busy, the pool's threads wait for each other whenever one is
descheduled, so a few tenths of a core of anyone's load (the browser drawing a result, the
server relaying it, this test reading the page) swing decode up to 2x: CI once read the tab at
0.56x the script while other processes used 0.93-1.00 cores beside the tab and 0.60-0.68
beside the script. That is the thread pool's physics, which the check is not about; at one
thread the harness's own cost is what remains to be seen."""


def _tab_against_script(
    page: Any, first: str
) -> tuple[list[tuple[float, float, float]], list[tuple[float, float, float]]]:
    """Issue 46 item 8, the model and not the harness: the tab's generation and the same
    workload from a script (this process: ortlab.generate, default prompt, new tokens and
    runs, at the tab's :data:`_THREADS`), interleaved tab, script, tab, script, tab, script:
    their decode tokens/s."""
    import ortlab

    model = ortlab.examples.load("tiny_llama_int4")
    tab, script = [_decode(first)], []
    loads = [_load(first)]
    for k in range(3):
        g = ortlab.generate(model, {"intra_op_threads": _THREADS}, profile=False, progress=False)
        script.append(g.decode_tokens_per_s)
        loads.append(f"script: {g.other_cores}")
        if k == 2:
            break
        shown = _DECODE.search(first[first.index("Generate (TTFT") :])
        before = shown.group(0) if shown else ""
        page.locator(".ortlab-lab button", has_text="Generate (TTFT").click()
        page.wait_for_function(
            "b => { const t = document.querySelector('.ortlab-lab').innerText;"
            " const m = t.slice(t.indexOf('Generate (TTFT')).match(/decode [\\d,.]+ tokens\\/s"
            " \\[[\\d,.]+, [\\d,.]+\\]/); return m && m[0] !== b; }",
            arg=before,
            timeout=240_000,
            polling=1000,  # while the worker measures: a layout a second, not every frame
        )
        wait_idle(page)
        first = page.locator(".ortlab-lab").inner_text()
        tab.append(_decode(first))
        loads.append(_load(first))
    print("other processes' cores while each side measured:", loads)  # kept in CI's log
    return tab, script


def _load(text: str) -> str:
    """What the tab said of the machine's load while it measured (its own sentence)."""
    head = text[text.index("Generate (TTFT") :]
    found = re.search(r"other processes used ([\d.]+)", head)
    return "tab: " + (found.group(1) if found else "no load said")


def _agree(tab: list[tuple[float, ...]], script: list[tuple[float, ...]]) -> str:
    """Within noise: the median of the tab's three generations against the script's three,
    within the spread each side shows on its own — its widest interval, and how far its own
    three calls stray from each other on a busy machine (the harness once cost the tab 2-10x:
    1,500-8,800 tokens/s against 13,000-18,000, with each side steady). '' when they agree,
    else what disagreed."""
    mid_tab = statistics.median(t[0] for t in tab)
    mid_script = statistics.median(s[0] for s in script)
    within = max(t[2] / t[1] for t in [*tab, *script])
    between = max(max(x[0] for x in side) / min(x[0] for x in side) for side in (tab, script))
    spread = max(within, between, 1.25)
    ratio = mid_tab / mid_script
    return "" if 1 / spread <= ratio <= spread else repr((ratio, spread, tab, script))


def test_the_generate_tab_reads_at_both_sizes(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    """A decoder's Lab (the bundled genai-built Llama) in JupyterLab, a core kept busy: the
    Generate tab's button runs a generation and the tab reads at both sizes — the headline
    (TTFT, prefill and decode tokens/s with their intervals), the time-per-token chart, the
    phase x layer table, the weight multiplications against the ceilings, the list of each
    phase's slowest nodes — and its benchmark matrix (llama-bench's pp and tg at depths 0 and
    256, each cell by layer) reads too, with no control clipped and no sideways scrollbar."""
    root = tmp_path / "root"
    root.mkdir()
    cells = [
        f"import os; os.environ['ORTLAB_CACHE_DIR'] = {os.environ['ORTLAB_CACHE_DIR']!r}",
        "import ortlab\n"
        "lab = ortlab.Lab(ortlab.examples.load('tiny_llama_int4'), runs=10, run_on_start=False)\n"
        "with lab.held():\n"
        f"    lab.controls.intra.value = {_THREADS}\n"
        "lab.run()\n"
        "lab",
    ]
    write_notebook(root / "generate.ipynb", cells)
    problems: dict[str, list[str]] = {}
    with busy_core(), jupyterlab(root, tmp_path / "home") as handle:
        context, page = open_lab(browser, handle, "generate.ipynb", 1280, 800)
        _open_tab(page, "History")
        _wait_text(page, "cpu · all")
        wait_idle(page)
        _open_tab(page, "Generate")
        page.locator(".ortlab-lab button", has_text="Generate (TTFT").click()
        _wait_text(page, "Per layer, share of each phase")
        wait_idle(page)
        for width, height in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            _look(page, "Generate", (width, height), True, artifacts, problems)
        page.set_viewport_size({"width": 1280, "height": 800})
        page.get_by_text("Weight multiplications against").scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "lab_generate_result_1280x800.png"))
        text = page.locator(".ortlab-lab").inner_text()
        tab, script = _tab_against_script(page, text)
        # a figure measured under load holds, or is measured again: once, when the two sides
        # disagree beyond what each shows of its own noise (CI, a core kept busy and the rest
        # of the suite's processes beside, once read the script at 0.43x the tab)
        disagreed = _agree(tab, script)
        if disagreed:
            print("tab and script disagreed, measured again:", disagreed)
            tab, script = _tab_against_script(page, page.locator(".ortlab-lab").inner_text())
        options = page.locator(".ortlab-gen-nodes option").all_text_contents()
        listed = [o.replace("\xa0", " ") for o in options]  # the widget keeps spaces
        # the benchmark matrix from the same tab: llama-bench's pp and tg at two depths
        page.locator(".ortlab-lab button", has_text="Benchmark matrix").click()
        _wait_text(page, "t/s (mean ± sd)")
        wait_idle(page)
        page.get_by_text("t/s (mean ± sd)").scroll_into_view_if_needed()
        for width, height in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_timeout(400)
            page.screenshot(path=str(artifacts / f"lab_generate_matrix_{width}x{height}.png"))
            found = page.evaluate(_PROBLEMS)
            if found:
                problems[f"Generate (matrix) at {width}x{height}"] = found
        matrix = page.locator(".ortlab-lab").inner_text()
        no_console_errors(page)
        context.close()
    disagreed = _agree(tab, script)
    assert not disagreed, disagreed
    assert "pp128 @ d256" in matrix and "tg64 @ d256" in matrix
    assert "Share of each test's profiled time by layer" in matrix
    assert listed and all(o.startswith(("prefill · ", "decode · ")) for o in listed), listed
    assert "time to first token" in text and "tokens/s" in text and "layer 0" in text
    head = text[text.index("Generate (TTFT") :]
    assert head.index("TTFT ") < head.index("time per token against"), "the headline leads"
    assert "Weight multiplications against this machine's ceilings" in text
    assert "Slowest nodes per step" in text
    assert not problems, json.dumps(problems, indent=1, ensure_ascii=False)
