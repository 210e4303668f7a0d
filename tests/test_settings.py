"""Configuration in one place: citekeeper/settings.py is the one module that reads the environment; the CLI and the
code location build from its Settings, and everything below them takes values as arguments."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import dagster as dg
import pytest
from click.testing import CliRunner

from assets import citations as citation_assets
from assets import corpus as ingest_assets
from assets.partitions import corpus_versions
from citekeeper.search_index import EmbeddingModelUnavailable
from citekeeper.settings import Settings, SettingsError, read_settings, variable
from pipelines.cli import main
from tests.chunk_frames import write_tree
from tests.dagster_settings import settings
from tests.layers import LAYERS

REPO = Path(__file__).resolve().parent.parent
SETTINGS_MODULE = "citekeeper/settings.py"
# Where the settings become the code location's resources: a path stays a dg.EnvVar there, which Dagster resolves
# at run time (by the name citekeeper.settings gives it).
ENV_VAR_HOME = "pipelines/definitions.py"
READERS = ("environ", "environb", "getenv", "getenvb")
CLICK_READERS = ("envvar", "auto_envvar_prefix")  # click options and groups read these variables themselves


def _is_os_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and _is_name(node.value, "os")


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _writes(tree: ast.AST) -> set[int]:
    """The os.environ nodes of statements that only set a variable for a library or a child process:
    `os.environ[NAME] = value` and `os.environ.setdefault(NAME, value)`. They read no configuration."""
    allowed = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            allowed |= {id(t.value) for t in node.targets if isinstance(t, ast.Subscript) and _is_os_environ(t.value)}
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            function = node.value.func
            if isinstance(function, ast.Attribute) and function.attr == "setdefault" and _is_os_environ(function.value):
                allowed.add(id(function.value))
    return allowed


def environment_reads(path: Path, root: Path = REPO) -> list[str]:
    """Every place `path` reads the environment: os.environ / os.getenv (but for the writes above), names imported
    from os to read it, click's envvar options, and dg.EnvVar outside ENV_VAR_HOME."""
    relative = path.relative_to(root).as_posix()
    tree = ast.parse(path.read_text(), str(path))
    writes = _writes(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute) and node.attr in READERS and _is_name(node.value, "os"):
            if id(node) not in writes:
                found.append((line, f"os.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [(line, f"from os import {a.name}") for a in node.names if a.name in READERS]
        elif isinstance(node, ast.keyword) and node.arg in CLICK_READERS:
            found.append((node.value.lineno, f"click {node.arg}="))
        elif relative != ENV_VAR_HOME and (
            (isinstance(node, ast.Attribute) and node.attr == "EnvVar") or _is_name(node, "EnvVar")
        ):
            found.append((line, "EnvVar"))
    return [f"{relative}:{line}: {what}" for line, what in sorted(found)]


def product_modules(root: Path = REPO) -> list[Path]:
    return [
        path
        for package in LAYERS
        for path in sorted((root / package).rglob("*.py"))
        if path.relative_to(root).as_posix() != SETTINGS_MODULE and "sample_corpus" not in path.parts
    ]


def test_only_the_settings_module_reads_the_environment() -> None:
    assert [read for path in product_modules() for read in environment_reads(path)] == []


def test_the_check_sees_every_way_of_reading_the_environment(tmp_path: Path) -> None:
    (tmp_path / "parsers").mkdir()
    bad = tmp_path / "parsers" / "bad.py"
    bad.write_text(
        "import os\n"
        "from os import environ, getenv\n"
        "import click\n"
        "import dagster as dg\n"
        "a = os.environ.get('X')\n"
        "b = os.getenv('X')\n"
        "c = dict(os.environ)\n"
        "d = os.environ.setdefault('X', '1')\n"  # its value used: a read
        "opt = click.option('--x', envvar='X')\n"
        "e = dg.EnvVar('X')\n"
        "os.environ['TMPDIR'] = '/tmp/x'\n"  # a write for children: allowed
        "os.environ.setdefault('SCARF_NO_ANALYTICS', '1')\n"  # likewise
    )
    assert environment_reads(bad, tmp_path) == [
        "parsers/bad.py:2: from os import environ",
        "parsers/bad.py:2: from os import getenv",
        "parsers/bad.py:5: os.environ",
        "parsers/bad.py:6: os.getenv",
        "parsers/bad.py:7: os.environ",
        "parsers/bad.py:8: os.environ",
        "parsers/bad.py:9: click envvar=",
        "parsers/bad.py:10: EnvVar",
    ]
    assert [p.relative_to(tmp_path).as_posix() for p in product_modules(tmp_path)] == ["parsers/bad.py"]


def test_read_settings_parses_each_variable_and_names_the_bad_ones() -> None:
    assert read_settings({}) == Settings()
    assert read_settings({"CITEKEEPER_STORE": "", "CITEKEEPER_NLI_THREADS": " ", "UNRELATED": "x"}) == Settings()
    read = read_settings(
        {
            "CITEKEEPER_STORE": "/srv/store",
            "CITEKEEPER_GC_KEEP_LAST": " 7 ",
            "CITEKEEPER_GC_KEEP": "v1, release-2026 ,",
            "CITEKEEPER_LANGUAGE": " ZH ",
            "CITEKEEPER_LANCE_URI": "s3://b/l",
            "CITEKEEPER_STORAGE_OPTIONS": '{"allow_http": true, "region": "x"}',
            "CITEKEEPER_SOURCE_FIELDS_MAP": '{"updated_at": ["modified"]}',
        }
    )
    assert (read.store, read.gc_keep_last, read.gc_keep, read.language) == (
        "/srv/store",
        7,
        ("v1", "release-2026"),
        "zh",
    )
    assert read.source_fields_map == {"updated_at": ["modified"]}
    assert read.store_locations() == {  # LanceDB takes strings only: JSON true -> "true"
        "lance_uri": "s3://b/l",
        "parquet_uri": None,
        "storage_options": {"allow_http": "true", "region": "x"},
    }
    assert read_settings({}).store_locations() == {"lance_uri": None, "parquet_uri": None, "storage_options": {}}
    for env, message in [
        ({"CITEKEEPER_STORAGE_OPTIONS": "{aws_endpoint: x}"}, "CITEKEEPER_STORAGE_OPTIONS: must be JSON"),
        ({"CITEKEEPER_STORAGE_OPTIONS": '["x"]'}, "CITEKEEPER_STORAGE_OPTIONS: must be a JSON object"),
        ({"CITEKEEPER_GC_KEEP_LAST": "seven"}, "CITEKEEPER_GC_KEEP_LAST: must be a whole number, got 'seven'"),
        ({"CITEKEEPER_LANGUAGE": "fr"}, "CITEKEEPER_LANGUAGE: unknown language 'fr'; use one of auto, en, zh, multi"),
        ({"CITEKEEPER_SOURCE_FIELDS_MAP": '{"updated_at": "modified"}'}, "CITEKEEPER_SOURCE_FIELDS_MAP: .*updated_at"),
    ]:
        with pytest.raises(SettingsError, match=message):
            read_settings(env)
    assert variable("embedding_model") == "CITEKEEPER_EMBEDDING_MODEL"


def test_a_command_refuses_a_bad_variable_naming_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["versions", "--store", str(tmp_path)], env={"CITEKEEPER_STORAGE_OPTIONS": "{aws_endpoint: x}"}
    )
    assert result.exit_code == 2 and "CITEKEEPER_STORAGE_OPTIONS: must be JSON" in result.output


def test_the_embedding_model_is_a_resource_field_reaching_re_anchoring(tmp_path: Path) -> None:
    """A Dagster run re-anchors with the verifier resource's embedding_model (a model that cannot load: it warns,
    naming it, and searches full text only), not with one from the process's environment."""
    instance = dg.DagsterInstance.ephemeral()
    missing = tmp_path / "no-such-embedding-model"
    config = settings(store_dir=str(tmp_path / "store"), embedding_model=str(missing))
    assets = [ingest_assets.ingested_corpus, citation_assets.chunk_diff, citation_assets.citation_status]

    def materialize(version: str, texts: dict[str, str], answers: Path | None = None) -> None:
        instance.add_dynamic_partitions(corpus_versions.name, [version])
        resources = settings(
            store_dir=config.store.store_dir,
            source_dir=str(write_tree(tmp_path / version, texts)),
            answers_path=str(answers) if answers else None,
            embedding_model=config.verifier.embedding_model,
        ).resources()
        assert dg.materialize(assets, instance=instance, partition_key=version, resources=resources).success

    materialize("v1", {"a.md": "# A\n\nRetries back off exponentially between attempts.\n"})
    answers = tmp_path / "answers.jsonl"
    quote = "Retries back off exponentially between attempts."
    answers.write_text(
        json.dumps(
            {
                "answer_id": "a",
                "answer": "Retries back off [1].",
                "corpus_version": "v1",
                "references": [{"ref": 1, "source_path": "a.md", "quote": quote}],
            }
        )
    )
    with pytest.warns(EmbeddingModelUnavailable, match="no-such-embedding-model"):
        materialize("v2", {"a.md": "# A\n\nNothing here resembles the old sentence at all.\n"}, answers)
