"""pyproject.toml declares what the code imports, and nothing it does not need.

Every third-party module imported (at any depth, lazy imports included) by the five product packages must
come from a distribution in [project.dependencies] (or, for the one import behind an optional code path,
its extra); what tests/, bench/ and scripts/ import may also come from an extra (dev included). In the
other direction, every declared distribution is imported by that code or is listed below with the reason
it is needed without being imported. Modules are mapped to distributions with
importlib.metadata.packages_distributions(), so the check runs against what is installed.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from tests.layers import LAYERS

REPO = Path(__file__).resolve().parent.parent
DEVELOPMENT = ("tests", "bench", "scripts")
FIRST_PARTY = {*LAYERS, "tests", "bench"}

# Imports on an optional code path, and the extra that provides them.
OPTIONAL_IMPORTS = {"dagster_k8s": "k8s"}  # pipelines/definitions.py, only with CITEKEEPER_EXECUTOR=k8s

# The bench extra: bench/bench_peers.py's peers (LangChain, LlamaIndex), never a runtime dependency. scripts/setup.sh
# does not install it, so where it is not installed its modules are mapped to its distributions by name.
BENCH_ONLY = {
    "langchain_core": "langchain-core",
    "langchain_classic": "langchain-classic",
    "llama_index": "llama-index-core",
}

# Declared and needed, though no code here imports them by name.
NOT_IMPORTED = {
    # unstructured's PDF text layer (strategy="fast") imports these, some through unstructured-inference,
    # which scripts/setup.sh installs --no-deps; its [pdf] extra is not installed
    **dict.fromkeys(
        ["pdfminer-six", "pikepdf", "pypdfium2", "opencv-python", "pandas", "scipy", "matplotlib"],
        "unstructured's PDF text layer",
    ),
    "gcsfs": "fsspec loads it for gs:// sources (parsers/sources/object_store.py; the gcs extra)",
    "adlfs": "fsspec loads it for az:// sources (parsers/sources/object_store.py; the azure extra)",
    "onnx": "torch.onnx.export and onnxruntime.quantization (verify --backend onnx)",
    "dagster-webserver": "dagster dev and the UI (tests/test_webserver.py)",
    "dagster-graphql": "the webserver's GraphQL API (tests/test_webserver.py)",
    "dagster-postgres": "deploy/dagster-postgres.yaml names its storage class (tests/test_postgres.py)",
    "pytest-timeout": "pytest plugin (timeout in [tool.pytest.ini_options])",
    "setuptools": "the build backend tests/test_wheel.py builds the wheel with",
    "ruff": "make lint: the linter and formatter",
    "mypy": "make lint: the type checker",
    **dict.fromkeys(["types-pyyaml", "types-tqdm", "types-openpyxl", "types-xlrd"], "stubs mypy reads (make lint)"),
}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    return normalize(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1))


PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
CORE = {requirement_name(r) for r in PROJECT["dependencies"]}
EXTRAS = {extra: {requirement_name(r) for r in reqs} for extra, reqs in PROJECT["optional-dependencies"].items()}
EVERYTHING = CORE.union(*EXTRAS.values())


def third_party_imports(directories: tuple[str, ...]) -> list[tuple[str, str]]:
    """(where, top-level module) for every import of a module outside the stdlib and this repository."""
    found = []
    for directory in directories:
        for path in sorted((REPO / directory).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules = [node.module]
                else:
                    continue
                for module in modules:
                    top = module.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in FIRST_PARTY and top != "__future__":
                        found.append((f"{path.relative_to(REPO)}:{node.lineno}", top))
    return found


@functools.cache
def installed_modules() -> dict[str, list[str]]:
    return packages_distributions()  # scans every installed distribution: once


def distributions_of(module: str) -> set[str]:
    installed = {normalize(name) for name in installed_modules().get(module, [])}
    return installed or ({BENCH_ONLY[module]} if module in BENCH_ONLY else set())


def test_the_requirement_names_parse():
    assert {"torch", "polars", "pyyaml", "dagster"} <= CORE and {"postgres", "k8s", "dev"} <= EXTRAS.keys()
    assert {"dagster-postgres", "dagster-k8s"} <= EXTRAS["dev"]  # dev runs the tests of both extras


@pytest.mark.parametrize("directories, declared", [(LAYERS, CORE), (DEVELOPMENT, EVERYTHING)], ids=["product", "dev"])
def test_every_third_party_import_is_declared(directories: tuple[str, ...], declared: set[str]):
    undeclared = []
    for where, module in third_party_imports(directories):
        allowed = declared | EXTRAS[OPTIONAL_IMPORTS[module]] if module in OPTIONAL_IMPORTS else declared
        dists = distributions_of(module)
        if not dists & allowed:
            undeclared.append(f"{where}: imports {module} (from {sorted(dists) or 'no installed distribution'})")
    assert undeclared == []


def test_every_declared_dependency_is_imported_or_explained():
    imported = set()
    for _, module in third_party_imports(LAYERS + DEVELOPMENT):
        imported |= distributions_of(module)
    unexplained = sorted(EVERYTHING - imported - NOT_IMPORTED.keys())
    assert unexplained == [], f"declared, never imported, no reason given: {unexplained}"
    stale = sorted(name for name in NOT_IMPORTED if name not in EVERYTHING or name in imported)
    assert stale == [], f"NOT_IMPORTED lists what is imported now or no longer declared: {stale}"


def test_bench_only_packages_are_no_runtime_dependency():
    assert set(BENCH_ONLY.values()) == EXTRAS["bench"]
    for extra, requirements in {"core": CORE, **EXTRAS}.items():
        assert extra == "bench" or not requirements & EXTRAS["bench"], f"{extra} declares a bench-only package"
    product = {module for _, module in third_party_imports(LAYERS)}
    assert not product & BENCH_ONLY.keys(), "the product imports a bench-only package"


def test_optional_imports_are_not_core():
    for module, extra in OPTIONAL_IMPORTS.items():
        assert distributions_of(module) & EXTRAS[extra] and not distributions_of(module) & CORE, module
