"""Virtual environments holding one onnxruntime version each, built once from PyPI for a worker.

``interpreter("1.32.0")`` returns the Python of a virtual environment with ``onnxruntime==1.32.0``
and the few packages ortlab's worker imports (numpy, onnx, msgspec, psutil), pinned by a pip
constraints file to the versions this process runs, so what travels between the processes
(numpy arrays, ONNX protos) reads the same on both sides; a version whose own requirements
refuse those pins is installed with pip's choice of them instead. The environment lives in
``$ORTLAB_VENV_DIR`` (else the ``venvs`` folder of ortlab's cache), one folder per onnxruntime
version, Python version and platform. It is built once: a marker file written last says it is
complete, a lock file keeps two processes from building it at once, and a half-built folder
(a crash, a failed pip) is removed and built again. When pip fails, the error names the
version, the versions PyPI offers where pip said them, and pip's last lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

from ortlab.core import cache
from ortlab.core.errors import VersionInstallError
from ortlab.core.grammar import VERSION
from ortlab.core.run import Progress
from ortlab.engine import tasks
from ortlab.engine.calls import Via, run
from ortlab.engine.worker import Worker

__all__ = [
    "DEPENDENCIES",
    "env_dir",
    "installed",
    "interpreter",
    "start_worker",
    "venv_root",
]

DEPENDENCIES = ("numpy", "onnx", "msgspec", "psutil")
"""What the worker imports besides onnxruntime (``ORTLAB_CHILD=1``: no pandas, no renderers)."""
PINNED = ("numpy", "onnx", "msgspec", "psutil", "protobuf", "ml_dtypes")
"""Pinned to this process's versions when the onnxruntime version allows it."""
MARKER = ".ortlab-ready"
PIP_TIMEOUT_S = 900.0


def venv_root() -> Path:
    """``$ORTLAB_VENV_DIR`` if set, else ``<cache>/venvs``; created if missing."""
    env = os.environ.get("ORTLAB_VENV_DIR")
    root = Path(env) if env else cache.subdir("venvs")
    root.mkdir(parents=True, exist_ok=True)
    return root


def env_dir(version: str) -> Path:
    """The folder of ``version``'s environment (built or not)."""
    py = f"py{sys.version_info.major}{sys.version_info.minor}"
    platform = re.sub(r"[^A-Za-z0-9]+", "_", sysconfig.get_platform())
    return venv_root() / f"onnxruntime-{version}-{py}-{platform}"


def _python(folder: Path) -> Path:
    if sys.platform == "win32":
        return folder / "Scripts" / "python.exe"
    return folder / "bin" / "python"


def installed(version: str) -> dict[str, str] | None:
    """What the marker of ``version``'s environment records (None when it is not built)."""
    marker = env_dir(version) / MARKER
    with contextlib.suppress(OSError, ValueError):
        data: dict[str, str] = json.loads(marker.read_text())
        return data
    return None


def interpreter(version: str, progress: Progress | None = None) -> Path:
    """The Python of the environment holding ``onnxruntime==version``, built on first use
    (~20 MB per wheel from PyPI, about a minute) and reused after. Raises
    :class:`VersionInstallError` saying what failed and how to fix it."""
    _check_version(version)
    folder = env_dir(version)
    marker = folder / MARKER
    if marker.exists():
        os.utime(marker)  # used again: the last of the cache's entries to be evicted
        return _python(folder)
    with _lock(folder.with_name(folder.name + ".lock")):
        if marker.exists():  # another process built it while this one waited
            return _python(folder)
        if folder.exists():  # a build that did not finish
            shutil.rmtree(folder, ignore_errors=True)
        try:
            record = _build(version, folder, progress or (lambda _d, _t: None))
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        cache.write_atomic(marker, json.dumps(record, indent=1).encode())  # written last
    return _python(folder)


def _check_version(version: str) -> None:
    if not isinstance(version, str) or not VERSION.match(version):
        raise VersionInstallError(
            f"{version!r} is not an onnxruntime version: give one as PyPI spells it, e.g. "
            "'1.31.1' (see https://pypi.org/project/onnxruntime/#history)."
        )


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` between processes (waits for the holder)."""
    with path.open("a+") as fh:
        if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
            import msvcrt

            while True:
                try:
                    msvcrt.locking(fh.fileno(), msvcrt.LK_NBLCK, 1)
                    break
                except OSError:
                    time.sleep(0.5)
            try:
                yield
            finally:
                msvcrt.locking(fh.fileno(), msvcrt.LK_UNLCK, 1)
            return
        import fcntl

        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _clean_env() -> dict[str, str]:
    """This environment without what would leak another onnxruntime into the new one."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PYTHONNOUSERSITE="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def _pins() -> list[str]:
    out = []
    for name in PINNED:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out.append(f"{name}=={metadata.version(name)}")
    return out


def _build(version: str, folder: Path, progress: Progress) -> dict[str, str]:
    progress(0, 3)
    created = subprocess.run(  # this interpreter's own venv module
        [sys.executable, "-m", "venv", str(folder)],
        capture_output=True,
        text=True,
        env=_clean_env(),
        check=False,
        timeout=300,
    )
    if created.returncode != 0:
        raise VersionInstallError(
            f"ortlab could not create a virtual environment for onnxruntime {version} in "
            f"{folder}: {_tail(created.stdout + created.stderr)}\nCheck that `{sys.executable} "
            "-m venv` works here (Debian/Ubuntu: apt install python3-venv) and that the folder "
            "is writable, or set ORTLAB_VENV_DIR to another folder."
        )
    progress(1, 3)
    constraints = folder / "constraints.txt"
    constraints.write_text("\n".join(_pins()) + "\n")
    out = _pip(version, folder, constraints)
    if out.returncode != 0 and _conflict(out.stdout):  # this ORT wants other numpy/onnx
        out = _pip(version, folder, None)
    if out.returncode != 0:
        raise VersionInstallError(_pip_failure(version, out.stdout))
    progress(2, 3)
    check = subprocess.run(  # the new interpreter, importing what the worker imports
        [
            str(_python(folder)),
            "-c",
            "import onnxruntime, " + ", ".join(DEPENDENCIES) + "; print(onnxruntime.__version__)",
        ],
        capture_output=True,
        text=True,
        env=_clean_env(),
        check=False,
        timeout=120,
    )
    loaded = check.stdout.strip().splitlines()[-1:] or [""]
    if check.returncode != 0 or loaded[0] != version:
        raise VersionInstallError(
            f"onnxruntime {version} installed in {folder} but does not load there"
            + (f" (it reports {loaded[0]})" if loaded[0] else "")
            + f": {_tail(check.stdout + check.stderr)}\nThis wheel may not support this CPU "
            "or Python; try another version."
        )
    progress(3, 3)
    return {
        "onnxruntime": version,
        "python": sys.version.split()[0],
        "platform": sysconfig.get_platform(),
        "built": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def _pip(version: str, folder: Path, constraints: Path | None) -> subprocess.CompletedProcess[str]:
    argv = [
        str(_python(folder)),
        "-m",
        "pip",
        "install",
        "--retries",
        "1",
        "--timeout",
        "20",
        "--only-binary",
        ":all:",
        f"onnxruntime=={version}",
        *DEPENDENCIES,
    ]
    if constraints is not None:
        argv += ["-c", str(constraints)]
    try:
        return subprocess.run(  # pip, in the new environment
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_clean_env(),
            check=False,
            timeout=PIP_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as err:
        raise VersionInstallError(
            f"Installing onnxruntime {version} took more than {PIP_TIMEOUT_S:.0f} s: the "
            "network to PyPI is too slow or stalled. Try again, or install it on a machine with "
            f"a faster connection and copy {folder.parent} (ORTLAB_VENV_DIR)."
        ) from err


def _conflict(text: str) -> bool:
    return "ResolutionImpossible" in text or "conflicting dependencies" in text


_OFFLINE = (
    "NewConnectionError",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Failed to establish a new connection",
    "ProxyError",
    "ConnectTimeout",
    "Max retries exceeded",
    "Could not fetch URL",
)


def _pip_failure(version: str, text: str) -> str:
    """What failed, what is available, how to fix: from pip's output."""
    head = f"ortlab could not install onnxruntime=={version} into its own environment"
    offered = re.search(r"\(from versions: ([^)]*)\)", text)
    listed = [v.strip() for v in offered.group(1).split(",")] if offered else []
    listed = [v for v in listed if v and v != "none"]
    if any(s in text for s in _OFFLINE):
        why = (
            ": PyPI could not be reached from here (no network, or a proxy in the way). "
            "Connect this machine to the network (set HTTPS_PROXY if you use a proxy) or "
            "point pip at a mirror holding the wheels (PIP_INDEX_URL), then try again."
        )
    elif listed:
        why = (
            f": PyPI has no onnxruntime {version} wheel for this platform "
            f"({sysconfig.get_platform()}, Python {sys.version_info.major}."
            f"{sys.version_info.minor}). Versions available here: "
            f"{', '.join(listed[-12:])}. Pick one of those."
        )
    elif "from versions: none" in text:
        why = (
            ": pip found no onnxruntime wheel at all for this platform "
            f"({sysconfig.get_platform()}, Python {sys.version_info.major}."
            f"{sys.version_info.minor}), or could not read the index. Check the network "
            "and PIP_INDEX_URL."
        )
    else:
        why = ": pip failed. Fix what pip says below, or pick another version."
    return f"{head}{why}\npip's last lines:\n{_tail(text)}"


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def start_worker(version: str, *, progress: bool = False) -> Worker:
    """A worker running ``version`` (its environment built first if need be), checked."""
    bar = None
    if progress and installed(version) is None:
        from tqdm.auto import tqdm

        bar = tqdm(total=3, desc=f"installing onnxruntime {version} (once)", leave=False)

    def step(done: int, total: int) -> None:
        if bar is not None:
            bar.total, bar.n = total, done
            bar.refresh()

    try:
        python = interpreter(version, step)
    finally:
        if bar is not None:
            bar.close()
    worker = Worker(python)
    loaded = run(tasks.ort_version, Via(worker=worker, context=f"onnxruntime {version}"))
    if loaded != version:
        worker.stop()
        raise VersionInstallError(
            f"The environment for onnxruntime {version} ({python}) loads onnxruntime {loaded}. "
            f"Delete {env_dir(version)} and run again to rebuild it."
        )
    return worker
