"""reports/ renders what changes/ computed and never reads the store. The rule, checked on the source:

1. No module of reports/ imports, directly or through the product modules it imports (every import counts, lazy
   ones too, and the packages an import runs), a module that opens the store: `citekeeper.store` (the corpus
   store), `citekeeper.answers.store` (the answer store), `citekeeper.layout` (the store's paths),
   `citekeeper.lance_tables`, `citekeeper.search_index` (LanceDB tables), or lancedb itself.
2. No function of reports/ takes a parameter named `store` or `store_root`: a store handed in is a store read.

The statuses, plans and histories a report shows come in as arguments (changes.report_inputs reads them)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.layers import LAYERS

REPO = Path(__file__).resolve().parent.parent
STORE_READERS = frozenset(
    {
        "citekeeper.store",
        "citekeeper.answers.store",
        "citekeeper.layout",
        "citekeeper.lance_tables",
        "citekeeper.search_index",
        "lancedb",
    }
)
STORE_PARAMETERS = frozenset({"store", "store_root"})


def module_path(module: str, root: Path) -> Path | None:
    """The product module's file (a package: its __init__.py); None outside the product packages."""
    if module.split(".")[0] not in LAYERS:
        return None
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def imports_of(path: Path, root: Path) -> set[str]:
    """Every module `path` imports, with the packages each import runs and the submodules `from P import m` names."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if module_path(f"{node.module}.{a.name}", root)}
    parents = {".".join(name.split(".")[:i]) for name in found for i in range(1, name.count(".") + 1)}
    return found | parents


def store_reads(package: str, root: Path = REPO) -> list[str]:
    """Each module of `package` that reaches a store reader, with the chain of imports that reaches it."""
    bad = []
    for path in sorted((root / package).rglob("*.py")):
        start = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        chains, seen = [[start]], {start}
        while chains:
            chain = chains.pop()
            if chain[-1].split(".")[0] == "lancedb" or chain[-1] in STORE_READERS:
                bad.append(" -> ".join(chain))
                continue
            source = module_path(chain[-1], root)
            for module in sorted(imports_of(source, root) - seen) if source else []:
                seen.add(module)
                chains.append([*chain, module])
    return bad


def store_parameters(package: str, root: Path = REPO) -> list[str]:
    bad = []
    for path in sorted((root / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                bad += [
                    f"{path.relative_to(root)}:{node.lineno}: {node.name}({a.arg})"
                    for a in arguments
                    if a.arg in STORE_PARAMETERS
                ]
    return bad


def test_reports_import_nothing_that_reads_the_store():
    assert store_reads("reports") == []


def test_no_report_function_takes_a_store():
    assert store_parameters("reports") == []


def test_the_checks_see_a_store_read_through_other_modules_and_a_store_argument(tmp_path: Path):
    for package, source in {
        "reports/page.py": "def page(rows):\n    from changes.rows import read\n    return read(rows)\n",
        "changes/rows.py": "from changes.shelf import LOCK\n",
        "changes/shelf.py": "from citekeeper import store\nLOCK = 1\n",
        "citekeeper/store.py": "",
        "reports/plot.py": "def plot(frame, store_root=None):\n    return frame\n",
    }.items():
        (tmp_path / package).parent.mkdir(exist_ok=True)
        (tmp_path / package).write_text(source)
    assert store_reads("reports", tmp_path) == ["reports.page -> changes.rows -> changes.shelf -> citekeeper.store"]
    assert store_parameters("reports", tmp_path) == ["reports/plot.py:1: plot(store_root)"]
