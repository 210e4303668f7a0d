"""The built wheel works on its own: `citekeeper demo` from a fresh virtual environment, in an empty directory.

The wheel is built from a copy of the working tree (no stale build/ from earlier builds can leak into it) and
installed with --no-deps into a new venv. The dependency stack is not downloaded again: a .pth file puts
this environment's site-packages on the new venv's path. Only its directory is added; the .pth files inside
it (among them the editable install of citekeeper) are not processed, so citekeeper, parsers, verifiers,
assets and pipelines can only come from the wheel, which the test asserts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO, SAMPLE_CORPUS
from tests.layers import LAYERS

NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".citekeeper",
    ".dagster_home",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "out",
    ".whl",
    ".wheels",
)


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600) -> str:
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{cmd} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("source") / "citekeeper"
    shutil.copytree(REPO, source, ignore=NOT_SOURCE)
    out = tmp_path_factory.mktemp("wheel")
    # no build isolation: the build backend (setuptools, in the dev extra) is already here; nothing is fetched
    run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
        cwd=out,
    )
    (built,) = out.glob("citekeeper-*.whl")
    return built


def test_wheel_ships_the_packages_and_the_sample_corpus(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    corpus = {
        f"pipelines/sample_corpus/{p.relative_to(SAMPLE_CORPUS).as_posix()}"
        for p in SAMPLE_CORPUS.rglob("*")
        if p.is_file()
    }
    assert corpus and corpus <= names, sorted(corpus - names)
    assert {
        "pipelines/sample_corpus/answers.jsonl",
        "pipelines/sample_corpus/README.md",
        "pipelines/sample_corpus/v1/internal/db-failover-runbook.md.citekeeper.json",
    } <= names
    for package in LAYERS:
        modules = {f"{package}/{p.relative_to(REPO / package).as_posix()}" for p in (REPO / package).rglob("*.py")}
        assert modules <= names, sorted(modules - names)
    assert not any(name.startswith(("tests/", "bench/", "scripts/")) for name in names)


def test_demo_runs_from_the_installed_wheel(wheel: Path, tmp_path: Path):
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    python = venv / "bin" / "python"
    run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        cwd=tmp_path,
    )
    new_site = Path(
        run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp_path).strip()
    )
    # the dependencies: this environment's site-packages, as a plain path entry (its .pth files stay inert)
    (new_site / "_citekeeper_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    empty = tmp_path / "cwd"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEKEEPER_", "PYTHON", "DAGSTER_"))}
    env.update(HF_HUB_OFFLINE="1", UNSTRUCTURED_DISABLE_NOTICE="1")
    where = run(
        [
            str(python),
            "-c",
            f"import importlib; print('\\n'.join(importlib.import_module(p).__file__ for p in {LAYERS!r}))",
        ],
        cwd=empty,
        env=env,
    ).split()
    assert all(Path(path).is_relative_to(new_site) for path in where), where

    corpus = new_site / "pipelines" / "sample_corpus"
    before = sorted(p.relative_to(corpus) for p in corpus.rglob("*"))
    store = tmp_path / "store"
    output = run([str(venv / "bin" / "citekeeper"), "demo", "--no-model", "--store", str(store)], cwd=empty, env=env)
    assert f"store {store}" in output and "claims against v2:" in output
    for produced in (
        "versions/v1.json",
        "versions/v2.json",
        "citations/target_version=v2/citation_status.parquet",
        "citations/target_version=v2/blast_radius.parquet",
        "dagster_home",
    ):
        assert (store / produced).exists(), produced
    assert list(empty.iterdir()) == []  # nothing lands in the working directory
    assert sorted(p.relative_to(corpus) for p in corpus.rglob("*")) == before  # the package data is only read
