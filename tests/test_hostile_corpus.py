"""A hostile source tree (issue #21): each case is made here, at test time, beside good documents. One ingest
must finish without a traceback, quarantine each hostile input with its reason, register every good file,
and never let a link or a sidecar make an internal_only text visible."""

from __future__ import annotations

import errno
import json
import os
import zipfile
from pathlib import Path

import docx
import polars as pl
import pytest
from click.testing import CliRunner

from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from parsers.records import ParseConfig
from pipelines.cli import main

GOOD = "Backups run every night and are kept for thirty days."
INTERNAL = "internal/plan.md"


def alias_bomb(levels: int = 9) -> str:
    """YAML billion laughs: each level lists the previous one nine times (9**9 strings when expanded)."""
    lines = ['a0: &a0 "lol"']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines)


def hostile_tree(root: Path, outside: Path) -> dict[str, str]:
    """Writes the tree; returns each hostile path (as quarantined) -> the error type it must get."""
    (root / "good").mkdir(parents=True)
    (root / "good" / "ok.md").write_text(GOOD)
    (root / "internal").mkdir()
    (root / INTERNAL).write_text("The plan is to acquire the competitor in March.")
    (root / f"{INTERNAL}.citekeeper.json").write_text('{"access_scope": "internal_only"}')
    outside.mkdir()
    (outside / "secret.json").write_text('{"title": "OUTSIDE-TITLE", "access_scope": "user_visible"}')
    cases = {}

    def doc(name: str, text: str = GOOD, sidecar: str | None = None, error: str = "InvalidMetadata") -> Path:
        path = root / "hostile" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if sidecar is not None:
            (path.parent / f"{name}.citekeeper.json").write_text(sidecar)
        cases[f"hostile/{name}"] = error
        return path

    doc("surrogate-title.md", sidecar='{"title": "\\ud800 plan"}')
    doc("surrogate-doc-id.md", sidecar='{"doc_id": "\\udfff"}')
    doc("deep.md", sidecar="[" * 100_000 + "]" * 100_000)
    doc("duplicate-key.md", sidecar='{"access_scope": "internal_only", "access_scope": "user_visible"}')
    doc("deep-front-matter.md", "---\ntitle: " + "[" * 100_000 + "]" * 100_000 + "\n---\n" + GOOD)
    doc("alias-bomb.md", "---\n" + alias_bomb() + "\ntitle: x\n---\n" + GOOD)
    doc("merge-key.md", "---\nbase: &base {access_scope: internal_only}\n<<: *base\ntitle: t\n---\n" + GOOD)
    zero = doc("dev-zero.md")
    os.symlink("/dev/zero", zero.parent / "dev-zero.md.citekeeper.json")
    cases["hostile/dev-zero.md.citekeeper.json"] = "SymlinkOutsideRoot"
    fifo = doc("fifo.md")
    os.mkfifo(fifo.parent / "fifo.md.citekeeper.json")
    linked = doc("outside-sidecar.md")
    os.symlink(outside / "secret.json", linked.parent / "outside-sidecar.md.citekeeper.json")
    cases["hostile/outside-sidecar.md.citekeeper.json"] = "SymlinkOutsideRoot"
    with zipfile.ZipFile(root / "hostile" / "zip-bomb.docx", "w", zipfile.ZIP_DEFLATED) as bomb:
        bomb.writestr("word/document.xml", "<w:document/>")
        with bomb.open("word/media/zeros.bin", "w", force_zip64=True) as member:
            for _ in range(20):
                member.write(b"\0" * 2**24)  # 320 MiB unpacked, 320 KB packed
    cases["hostile/zip-bomb.docx"] = "LimitExceeded"
    bad_name = os.fsencode(root / "hostile") + b"/caf\xe9.md"
    Path(os.fsdecode(bad_name)).write_text(GOOD)
    cases["hostile/caf\\xe9.md"] = "InvalidFileName"
    return cases


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    root = base / "src"
    cases = hostile_tree(root, base / "outside")
    # Links into internal_only text: a file link and a directory link from a public folder.
    (root / "public").mkdir()
    os.symlink("../internal/plan.md", root / "public" / "plan.md")
    os.symlink("../internal", root / "public" / "mirror")
    store = CorpusStore(base / "store")
    result = ingest(root, store, version="v1", config=ParseConfig(workers=1))
    return {"root": root, "store": store, "result": result, "cases": cases, "base": base}


def test_every_hostile_input_is_quarantined_with_its_reason(hostile):
    found = {e.source_path: e for e in hostile["result"].errors}
    for source_path, error_type in hostile["cases"].items():
        assert source_path in found, (source_path, sorted(found))
        assert found[source_path].error_type == error_type and found[source_path].reason, found[source_path]
    assert "OUTSIDE-TITLE" not in json.dumps([e.reason for e in found.values()])  # nothing of the outside file


def test_the_good_files_are_registered(hostile):
    docs = hostile["store"].read_documents("v1", columns=["source_path", "access_scope", "title"])
    assert {"good/ok.md", INTERNAL, "public/plan.md", "public/mirror/plan.md"} <= set(docs["source_path"])
    assert "OUTSIDE-TITLE" not in set(docs["title"].drop_nulls())
    assert not set(docs["source_path"]) & set(hostile["cases"])


def test_a_link_to_internal_text_is_internal_whatever_its_own_place_says(hostile):
    docs = hostile["store"].read_documents("v1", columns=["source_path", "access_scope"])
    scope = dict(docs.iter_rows())
    assert scope["public/plan.md"] == scope["public/mirror/plan.md"] == scope[INTERNAL] == "internal_only"
    assert scope["good/ok.md"] == "user_visible"


def test_the_cli_ingest_finishes_without_a_traceback(hostile, tmp_path):
    result = CliRunner().invoke(
        main, ["ingest", str(hostile["root"]), "--store", str(tmp_path / "store"), "--workers", "1"]
    )
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "quarantined" in result.output


def test_a_file_name_cannot_forge_a_terminal_line(tmp_path):
    """A name with a newline and an ANSI escape is printed escaped: one line per quarantined file."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "ok.md").write_text(GOOD)
    (src / "x.exe\n  quarantined good.md: forged\x1b[2K").write_text("binary")
    result = CliRunner().invoke(main, ["ingest", str(src), "--store", str(tmp_path / "store"), "--workers", "1"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "quarantined " in line and ":" in line]
    assert lines == [
        "  quarantined x.exe\\n  quarantined good.md: forged\\x1b[2K: discover: UnsupportedFileType: "
        + lines[0].split("UnsupportedFileType: ", 1)[1]
    ]
    assert "\x1b" not in result.output


def test_answers_add_registers_the_good_lines_of_a_hostile_file(tmp_path):
    """A bad byte, a lone surrogate, a 100,000-deep array and a binary line are errors of their lines only; a
    repeated answer_id is said; a truncated Parquet file is one error, not a traceback."""
    good = {
        "answer_id": "ok",
        "answer": "Fine [1].",
        "corpus_version": "v1",
        "references": [{"ref": 1, "chunk_id": "ck_x"}],
    }
    lines = [
        json.dumps(good).encode(),
        b'{"answer_id": "caf\xe9"}',
        json.dumps(dict(good, answer_id="\ud800"))
        .encode("utf-8", "surrogatepass")
        .replace(b"\xed\xa0\x80", b"\\ud800"),
        b"[" * 100_000 + b"]" * 100_000,
        bytes(range(256)).replace(b"\n", b""),
        json.dumps(dict(good, answer="Fine again [1].")).encode(),
    ]
    path = tmp_path / "answers.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    result = CliRunner().invoke(main, ["answers", "add", str(path), "--store", str(tmp_path / "store")])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "1 added, 1 revised" in result.output
    for line in (2, 3, 4, 5):
        assert f"line {line}: " in result.output
    assert "line 6: answer_id: 'ok' is also on line 1" in result.output

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "ok.md").write_text(GOOD)
    CliRunner().invoke(main, ["ingest", str(tmp_path / "src"), "--store", str(tmp_path / "store"), "--workers", "1"])
    verified = CliRunner().invoke(
        main,
        [
            "verify",
            "--no-model",
            "--answers",
            str(path),
            "--out",
            str(tmp_path / "out"),
            "--store",
            str(tmp_path / "store"),
        ],
    )
    assert (
        verified.exit_code != 0
        and "line 2: json: not valid UTF-8" in verified.output
        and "Traceback" not in verified.output
    )

    parquet = tmp_path / "answers.parquet"
    pl.DataFrame([good]).write_parquet(parquet)
    parquet.write_bytes(parquet.read_bytes()[:-40])  # truncated
    result = CliRunner().invoke(main, ["answers", "add", str(parquet), "--store", str(tmp_path / "store")])
    assert result.exit_code == 1 and "not a readable Parquet file" in result.output and "Traceback" not in result.output


def test_a_document_over_a_cost_limit_is_quarantined_naming_the_limit(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "ok.md").write_text(GOOD)
    (src / "rows.csv").write_text("".join(f"row {i},value {i}\n" for i in range(50)))
    (src / "long.md").write_text("\n\n".join(f"Paragraph {i} says something about backups." for i in range(30)))
    document = docx.Document()
    document.add_paragraph(GOOD * 40)
    document.save(src / "big.docx")
    limits = ParseConfig(
        workers=1, max_chunk_chars=60, max_rows_per_sheet=10, max_chunks_per_document=20, max_decompressed_bytes=20_000
    )
    result = ingest(src, CorpusStore(tmp_path / "store"), version="v1", config=limits)
    found = {e.source_path: e for e in result.errors}
    assert {path: e.error_type for path, e in found.items()} == dict.fromkeys(
        ["big.docx", "long.md", "rows.csv"], "LimitExceeded"
    )
    assert "(max_decompressed_bytes)" in found["big.docx"].reason
    assert "(max_chunks_per_document)" in found["long.md"].reason
    assert "more than 10 rows" in found["rows.csv"].reason and "(max_rows_per_sheet)" in found["rows.csv"].reason
    assert result.manifest.n_documents == 1


def test_the_limits_are_settings_of_the_cli(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "rows.csv").write_text("".join(f"row {i},value {i}\n" for i in range(50)))
    (src / "ok.md").write_text(GOOD)
    result = CliRunner().invoke(
        main,
        [
            "ingest",
            str(src),
            "--store",
            str(tmp_path / "store"),
            "--workers",
            "1",
            "--max-rows-per-sheet",
            "10",
            "--parse-timeout",
            "60",
            "--max-file-bytes",
            "100000",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "quarantined rows.csv: parse: LimitExceeded: the file has more than 10 rows" in result.output


def test_an_answer_of_too_many_claims_is_refused_as_its_line(tmp_path):
    record = {
        "answer_id": "big",
        "answer": " ".join(f"Claim {i} holds." for i in range(30)),
        "corpus_version": "v1",
        "references": [],
    }
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps(record) + "\n" + json.dumps(dict(record, answer_id="small", answer="One claim.")) + "\n")
    result = CliRunner().invoke(
        main, ["answers", "add", str(path), "--store", str(tmp_path / "store"), "--max-claims-per-answer", "10"]
    )
    assert result.exit_code == 1 and "1 added" in result.output
    assert "line 1: claims: the answer has 30 claims, over the limit of 10 (max_claims_per_answer)" in result.output


def test_a_run_id_or_version_that_is_not_a_plain_name_is_refused(tmp_path):
    """`verify --run-id ../../../../x` wrote outside --out (#21)."""
    store = tmp_path / "store"
    src = tmp_path / "src"
    src.mkdir()
    (src / "ok.md").write_text(GOOD)
    assert (
        CliRunner()
        .invoke(main, ["ingest", str(src), "--store", str(store), "--workers", "1", "--version", "v1"])
        .exit_code
        == 0
    )
    for args in (
        ["verify", "--no-model", "--out", str(tmp_path / "out"), "--run-id", "../../../../x"],
        ["stale", "--against", "../v1"],
        ["verify", "--no-model", "--out", str(tmp_path / "out"), "--version", "..\n"],
    ):
        result = CliRunner().invoke(main, [*args, "--store", str(store)])
        assert result.exit_code != 0 and "Traceback" not in result.output, (args, result.output)
        assert "invalid run id" in result.output or "unknown corpus version" in result.output, result.output
    assert not (tmp_path / "x").exists() and not any(tmp_path.parent.glob("x"))


def test_a_version_whose_files_went_under_a_read_is_one_clear_error(tmp_path):
    """What a concurrent gc pruning the version leaves a reader with: a message, not a raw lance traceback."""
    store, src = tmp_path / "store", tmp_path / "src"
    src.mkdir()
    (src / "ok.md").write_text(GOOD)
    assert (
        CliRunner()
        .invoke(main, ["ingest", str(src), "--store", str(store), "--workers", "1", "--version", "v1"])
        .exit_code
        == 0
    )
    for data in (store / "lance" / "chunks.lance" / "data").iterdir():
        data.unlink()
    result = CliRunner().invoke(
        main, ["export", "chunks", "--version", "v1", "--out", str(tmp_path / "c.parquet"), "--store", str(store)]
    )
    assert result.exit_code == 1 and "cannot read the chunks of corpus version 'v1'" in result.output, result.output
    assert "Traceback" not in result.output


def test_a_full_disk_is_one_line_and_leaves_no_staging(tmp_path, monkeypatch):
    """ENOSPC during the commit (injected where the corpus store writes): the store keeps its last version,
    staging is cleaned, the command prints one clear line, and the rerun works."""
    store, src = tmp_path / "store", tmp_path / "src"
    src.mkdir()
    (src / "ok.md").write_text(GOOD)

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(store / "lance"))

    with monkeypatch.context() as patch:
        patch.setattr(CorpusStore, "commit_version", full_disk)
        result = CliRunner().invoke(main, ["ingest", str(src), "--store", str(store), "--workers", "1"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "no space left on device" in result.output and "run the command again" in result.output
    assert not any((store / "staging").glob("*")) and CorpusStore(store).versions() == []
    assert CliRunner().invoke(main, ["ingest", str(src), "--store", str(store), "--workers", "1"]).exit_code == 0


def test_a_long_line_taken_for_a_title_is_not_copied_into_every_chunk(tmp_path):
    """One line without spaces is a Title to unstructured; its text was every chunk's title and breadcrumb
    (5 MB: 23 GB in the ingesting process)."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "line.txt").write_text("x" * 300_000)
    store = CorpusStore(tmp_path / "store")
    ingest(tmp_path / "src", store, version="v1", config=ParseConfig(workers=1))
    chunks = store.read_chunks("v1", columns=["title", "section_path"])
    assert chunks.height >= 300
    assert (
        chunks["title"].str.len_chars().max() <= 200
        and chunks["section_path"].list.join("").str.len_chars().max() <= 200
    )


def test_a_directory_link_does_not_escape_the_scope_overrides(tmp_path):
    src = tmp_path / "src"
    (src / "internal").mkdir(parents=True)
    (src / "internal" / "plan.md").write_text("The plan is to acquire the competitor in March.")
    (src / "public").mkdir()
    os.symlink("../internal", src / "public" / "mirror")
    config = ParseConfig(workers=1, access_scope_overrides=(("internal/*", "internal_only"),))
    store = CorpusStore(tmp_path / "store")
    ingest(src, store, version="v1", config=config)
    scope = dict(store.read_documents("v1", columns=["source_path", "access_scope"]).iter_rows())
    assert scope == {"internal/plan.md": "internal_only", "public/mirror/plan.md": "internal_only"}
