"""docs/ stays a reference of its own: no cut marks left from the README it was cut from, and the CLI page's
summary names every option of every command, and only options the command has."""

from __future__ import annotations

import re
from pathlib import Path

import click

from pipelines.cli import main
from tests.cli_helpers import leaf_commands

REPO = Path(__file__).resolve().parent.parent
DOCS = sorted((REPO / "docs").glob("*.md"))
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# Every command that works on a store takes it; docs/cli.md says so once, under the summary.
SAID_ONCE = {"--store", "--help"}


def test_docs_hold_no_cut_marks():
    marks = [
        f"{page.name}:{number}: {line}"
        for page in DOCS
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if "<!--" in line or re.search(r"\bsection:\w", line)
    ]
    assert marks == []


def summary_lines() -> dict[str, str]:
    """'answers add' -> its lines in docs/cli.md's summary block (a line indented under it continues it)."""
    page = (REPO / "docs" / "cli.md").read_text()
    block = page.split("## The CLI at a glance\n\n```bash\n", 1)[1].split("\n```", 1)[0]
    names = sorted(leaf_commands(main), key=len, reverse=True)
    lines: dict[str, str] = {}
    current = None
    for line in block.splitlines():
        if line.startswith("citekeeper "):
            rest = line.removeprefix("citekeeper ")
            current = next(name for name in names if rest == name or rest.startswith(name + " "))
            lines[current] = ""
        lines[current] += " " + line.split("#", 1)[0]
    return lines


def test_cli_summary_names_each_command_with_its_options():
    commands, lines = leaf_commands(main), summary_lines()
    assert sorted(lines) == sorted(commands)
    for name, command in commands.items():
        has = {
            opt
            for param in command.params
            if isinstance(param, click.Option)
            for opt in param.opts + param.secondary_opts
        }
        named = set(OPTION.findall(lines[name]))
        assert (name, sorted(has - named - SAID_ONCE)) == (name, [])
        assert (name, sorted(named - has)) == (name, [])


def resource_table(page: str) -> dict[str, str]:
    """resource key -> its fields cell, from the resource table of docs/<page> ({} when it has none)."""
    text = (REPO / "docs" / page).read_text()
    rows = re.findall(r"^\| `(\w+)` \| `\w+Resource` \| (.+) \|$", text, flags=re.M)
    return dict(rows)


def test_one_resource_table_names_every_field_of_every_resource():
    from assets.resources import CitekeeperSettings

    assert [page.name for page in DOCS if resource_table(page.name)] == ["production.md"]
    table = resource_table("production.md")
    resources = CitekeeperSettings().resources()
    assert sorted(table) == sorted(resources)
    for key, resource in resources.items():
        named = set(re.findall(r"`(\w+)`", table[key]))
        assert (key, sorted(set(type(resource).model_fields) - named)) == (key, [])
