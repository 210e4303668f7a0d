"""Imports run one way, down tests.layers.LAYERS: citekeeper <- parsers <- changes <- verifiers <- reports <-
assets <- pipelines. Every import counts, lazy ones too. The layers below assets/ stay free of Dagster."""

import ast
import tomllib
from pathlib import Path

import pytest

from tests.layers import DAGSTER_FREE, LAYERS

REPO = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def violations(package: str, root: Path = REPO) -> list[str]:
    rank = LAYERS.index(package)
    bad = []
    for path in sorted((root / package).rglob("*.py")):
        for line, module in imported_modules(path):
            top = module.split(".")[0]
            if top in LAYERS and LAYERS.index(top) > rank:
                bad.append(f"{path.relative_to(root)}:{line}: imports {module} (a layer above {package})")
            if package in DAGSTER_FREE and top.startswith("dagster"):
                bad.append(f"{path.relative_to(root)}:{line}: imports {module} ({package} stays free of Dagster)")
    return bad


@pytest.mark.parametrize("package", LAYERS)
def test_imports_run_one_way(package: str) -> None:
    assert violations(package) == []


def test_the_check_sees_upward_and_dagster_imports(tmp_path: Path) -> None:
    (tmp_path / "parsers").mkdir()
    (tmp_path / "parsers" / "bad.py").write_text(
        "import dagster as dg\n\ndef f():\n    from verifiers.engine import verify\n"
    )
    assert violations("parsers", tmp_path) == [
        "parsers/bad.py:1: imports dagster (parsers stays free of Dagster)",
        "parsers/bad.py:4: imports verifiers.engine (a layer above parsers)",
    ]


def test_every_shipped_package_is_a_layer() -> None:
    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert [pattern.removesuffix("*") for pattern in include] == list(LAYERS)
