"""The wheel carries everything (issue 48 item 6): the sdist built from this tree and the wheel
built from that sdist (python -m build, as a release), installed into a fresh
virtual environment with nothing of the source tree importable, it holds the workshop
notebooks (byte for byte), the bundled decoders and the graph view's script; `ortlab
notebooks DIR` copies the workshop out and refuses to overwrite it; one CLI verb and the tour
notebook run from the installed package. The fresh environment borrows the dependencies of
.venv (a path file adds its site-packages; the editable install's hook there is not run), so
only ortlab itself comes from the wheel; one test installs it as a user does, its declared
dependencies resolved by pip into an environment of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.notebook]


def _run(cmd: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=900, env={**clean, **env}, check=False
    )
    assert done.returncode == 0, f"{cmd}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh environment's bin folder, the wheel)."""
    tmp = tmp_path_factory.mktemp("wheel")
    # as a release is built: the sdist from the tree, then the wheel from the sdist (what the
    # sdist leaves out, a wheel a user builds from it lacks)
    _run([sys.executable, "-m", "build", "--outdir", str(tmp), str(ROOT)], cwd=tmp)
    wheel = next(tmp.glob("ortlab-*.whl"))
    env = tmp / "fresh"
    venv.create(env, with_pip=False)
    purelib = Path(sysconfig.get_paths(vars={"base": str(env), "platbase": str(env)})["purelib"])
    (purelib / "_deps_from_dev_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(purelib),
            str(wheel),
        ],
        cwd=tmp,
    )
    return env / "bin", wheel


def test_the_sdist_and_the_wheel_built_from_it_hold_the_workshop_and_the_bundled_models(
    installed: tuple[Path, Path],
) -> None:
    _, wheel = installed
    sdist = next(wheel.parent.glob("ortlab-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        inside = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "LICENSE", "notebooks/00_tour.ipynb"} <= inside
    assert any(n.startswith("ortlab/decoders/") and n.endswith(".onnx") for n in inside)
    names = set(zipfile.ZipFile(wheel).namelist())
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks and all(f"ortlab/notebooks/{n}" in names for n in notebooks)
    assert any(n.startswith("ortlab/decoders/") and n.endswith(".onnx") for n in names)
    assert any(n.startswith("ortlab/views/graph/") and n.endswith(".js") for n in names)


def test_the_installed_package_copies_the_workshop_and_runs(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    bin_, _ = installed
    python = bin_ / "python"
    where = _run([str(python), "-c", "import ortlab; print(ortlab.__file__)"], cwd=tmp_path)
    assert str(ROOT) not in where.stdout and "fresh" in where.stdout  # the wheel's, not ours
    out = tmp_path / "workshop"
    said = _run([str(python), "-m", "ortlab", "notebooks", str(out)], cwd=tmp_path)
    assert "copied" in said.stdout
    for nb in (ROOT / "notebooks").glob("*.ipynb"):
        assert (out / nb.name).read_bytes() == nb.read_bytes()
    again = subprocess.run(
        [str(python), "-m", "ortlab", "notebooks", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert again.returncode == 2 and "nothing was copied" in again.stderr
    assert "--force" in again.stderr and "overwrite=True" not in again.stderr  # a shell user's fix
    inspect = _run([str(python), "-m", "ortlab", "inspect", "mlp"], cwd=tmp_path)
    assert "MatMul" in inspect.stdout
    _run(
        [
            str(python),
            "-m",
            "nbconvert",
            "--to",
            "html",
            "--execute",
            "--ExecutePreprocessor.timeout=600",
            "--ExecutePreprocessor.store_widget_state=False",
            "--output-dir",
            str(tmp_path),
            "--output",
            "tour",
            str(out / "00_tour.ipynb"),
        ],
        cwd=tmp_path,
        ORTLAB_LAB_SYNC="1",
        # nbconvert's templates are data of the environment the dependencies come from
        JUPYTER_PATH=str(Path(sys.prefix) / "share" / "jupyter"),
    )
    assert (tmp_path / "tour.html").stat().st_size > 10_000


def test_the_wheels_declared_dependencies_are_enough(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    """The wheel installed as a user installs it: into a fresh environment of its own, its
    dependencies resolved by pip from what it declares (nothing borrowed from .venv). pip
    finds them consistent, and the CLI, a measurement, the Lab and a figure run: an import
    the wheel does not declare fails here (~1 GB of wheels, from pip's cache after once)."""
    _, wheel = installed
    env = tmp_path / "user"
    _run([sys.executable, "-m", "venv", str(env)], cwd=tmp_path)
    python = env / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", str(wheel)], cwd=tmp_path)
    _run([str(python), "-m", "pip", "check"], cwd=tmp_path)
    bench = _run([str(python), "-m", "ortlab", "bench", "mlp", "--runs", "5"], cwd=tmp_path)
    assert "CPUExecutionProvider" in bench.stdout
    code = (
        "import ortlab; m = ortlab.examples.load('mlp'); p = ortlab.profile(m, runs=3, "
        "progress=False); p.plot(); ortlab.Lab(m); print(type(p).__name__, ortlab.__file__)"
    )
    shown = _run([str(python), "-c", code], cwd=tmp_path, ORTLAB_LAB_SYNC="1")
    assert shown.stdout.startswith("ProfileResult") and str(env) in shown.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["user"]  # nothing else written
