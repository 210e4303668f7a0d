"""The README's layout table stays true: every path it names exists, and it names every module of the five
packages (a package row names its modules as `module.py`). The README stays short, and its links to the
reference in docs/ resolve, one for every page there."""

from __future__ import annotations

import re
from pathlib import Path

from tests.layers import LAYERS

REPO = Path(__file__).resolve().parent.parent


def layout_rows() -> dict[str, str]:
    """path -> description, for each row of the table under `## Layout`."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| (.+) \|$", section, flags=re.M)
    assert rows, "no layout table under '## Layout'"
    return dict(rows)


def named_paths() -> set[str]:
    """Every path the table names: the row paths, and each `x.py` of a row, relative to that row's folder."""
    paths = set()
    for path, description in layout_rows().items():
        paths.add(path.rstrip("/"))
        folder = path if path.endswith("/") else ""
        for name in re.findall(r"`([\w/]+\.(?:py|sh))`", description):
            paths.add(name if "/" in name else folder + name)
    return paths


def test_every_path_in_the_layout_table_exists():
    missing = sorted(path for path in named_paths() if not (REPO / path).exists())
    assert missing == []


def test_every_module_of_the_packages_is_in_the_layout_table():
    modules = {
        path.relative_to(REPO).as_posix()
        for package in LAYERS
        for path in (REPO / package).rglob("*.py")
        if path.name != "__init__.py"
    }
    assert sorted(modules - named_paths()) == []
    assert {f"{package}/" for package in LAYERS} <= layout_rows().keys()


def test_the_readme_is_short_and_links_every_page_of_docs():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md)\)", readme))
    pages = {path.relative_to(REPO).as_posix() for path in (REPO / "docs").glob("*.md")}
    assert linked == pages
    for page in pages:  # every relative link of a page resolves too
        for target in re.findall(r"\]\((?!https?:)([^)#]+)", (REPO / page).read_text()):
            assert (REPO / page).parent.joinpath(target).resolve().exists(), f"{page} links {target}"
