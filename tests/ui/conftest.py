"""Real-browser fixtures: Debian's Chromium driven by Playwright (no browser download)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        message = "Chromium is not installed (scripts/install-browser.sh installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + ": under CI a skipped browser test would hide a broken install")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    # bypass_csp lets the test read canvas pixels; the page itself keeps its CSP for users.
    context = browser.new_context(viewport={"width": 1100, "height": 700}, bypass_csp=True)
    page = context.new_page()
    page.dialogs = []  # type: ignore[attr-defined]
    page.errors = []  # type: ignore[attr-defined]
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.route(
        "**/*",
        lambda r: (
            r.continue_() if r.request.url.startswith(("file:", "blob:", "data:")) else r.abort()
        ),
    )
    yield page
    context.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
