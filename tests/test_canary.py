"""The canary (issues #21, #31): a unique string sits only in withheld text: internal_only text, made so by a
sidecar, by front matter (one that a sidecar contradicts, with the canary in the front matter too), by a symlink and
by a later scope change; a `redacted` page's text (its sidecar's title, link and summary are shown, and hold no
canary); and an `aggregate_only` page whose text, title, file path and URL all hold it (front matter says
aggregate_only, its sidecar user_visible: the strictest holds). A public answer quotes internal text as if a public
page said so (its quote anchors nowhere). Every CLI command and every Dagster asset runs over the store, repair
--apply and verification included; the canary, and the aggregate_only page's doc_id, must appear in no shared output
file and no line printed or recorded as metadata, unless --include-internal-text was given (and then the file says
so)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from assets import backfill
from assets import citations as citation_assets
from assets import corpus as ingest_assets
from assets import verification as verification_assets
from assets.partitions import corpus_versions
from citekeeper.scope import AGGREGATE_MARK, RAW_TEXT_KEY, REDACTED, WITHHELD_TEXT
from citekeeper.store import CorpusStore
from pipelines.cli import main
from tests.dagster_settings import settings

CANARY = "QUOKKA-7F3A-CANARY"
PUBLIC = "Deploys run on Fridays after a second review of every change."
MOVED = "Rollbacks are rehearsed each quarter by the platform team on call."
# What the redacted page shows instead of its text (its sidecar's), and the aggregate_only page's path.
PRICING_TITLE, PRICING_URL = "Pricing overview", "https://docs.example.com/pricing/"
PRICING_SUMMARY = "How the plans are priced, in one paragraph."
AGGREGATE_PATH = f"metrics/{CANARY}-usage.md"


def tree(version: int) -> dict[str, str | None]:
    """The source files of each version. v2: MOVED leaves the public guide for an internal page (edited, with
    the canary beside it), and later.md turns internal_only while gaining the canary."""
    files = {
        "public/guide.md": f"# Guide\n\n{PUBLIC}\n\n{MOVED}\n" if version == 1 else f"# Guide\n\n{PUBLIC}\n",
        "internal/plan.md": f"# Plan\n\nThe acquisition is code-named {CANARY} in every memo.\n",
        "internal/plan.md.citekeeper.json": '{"access_scope": "internal_only"}',
        "internal/memo.md": (
            f"---\naccess_scope: internal_only\n---\n# Memo\n\nBudget owners sign off on {CANARY} first.\n"
        ),
        "public/later.md": "# Later\n\nQuarterly budget reviews are held in the main office.\n",
        # front matter and sidecar disagree: the strictest holds; the front matter itself is the document's words
        "internal/board.md": (
            f"---\naccess_scope: internal_only\ndescription: {CANARY} board notes\nmenu:\n  main:\n    "
            f"weight: 3\n---\n# Board\n\nThe board approved {CANARY} on Monday.\n"
        ),
        "internal/board.md.citekeeper.json": '{"access_scope": "user_visible"}',
        "redacted/pricing.md": f"# Pricing\n\nThe {CANARY} discount applies to annual plans only.\n",
        "redacted/pricing.md.citekeeper.json": json.dumps(
            {"access_scope": "redacted", "title": PRICING_TITLE, "source_url": PRICING_URL, "summary": PRICING_SUMMARY}
        ),
        AGGREGATE_PATH: f"---\naccess_scope: aggregate_only\ntitle: {CANARY} usage\nurl: https://metrics.example.com/{CANARY}/\n"
        f"---\n# {CANARY} usage\n\nWeekly active seats of {CANARY} rose by a tenth.\n",
        f"{AGGREGATE_PATH}.citekeeper.json": '{"access_scope": "user_visible"}',
        # aggregate_only files named in no listing: one with nothing to cite, one of a type no parser reads and one
        # that fails to parse (their level from a sidecar), and one removed in v2
        f"metrics/{CANARY}-empty.md": "---\naccess_scope: aggregate_only\n---\n",
        f"metrics/{CANARY}-export.xyz": "seats,42\n",
        f"metrics/{CANARY}-export.xyz.citekeeper.json": '{"access_scope": "aggregate_only"}',
        f"metrics/{CANARY}-scan.pdf": "%PDF-1.4\nnot a PDF past its first line\n",
        f"metrics/{CANARY}-scan.pdf.citekeeper.json": '{"access_scope": "aggregate_only"}',
        f"metrics/{CANARY}-old.md": f"---\naccess_scope: aggregate_only\n---\n# Old\n\nSeats of {CANARY} last year.\n",
    }
    if version == 2:
        files[f"metrics/{CANARY}-old.md"] = None
        files[AGGREGATE_PATH] = files[AGGREGATE_PATH].replace("rose by a tenth", "fell by a fifth in March")
        files["redacted/pricing.md"] += "\nMonthly plans are billed in arrears.\n"
        files["internal/plan.md"] += f"\n{MOVED.replace('each quarter', 'each quarter for ' + CANARY)}\n"
        files["public/later.md"] += f"\nThe {CANARY} budget is reviewed apart.\n"
        files["public/later.md.citekeeper.json"] = '{"access_scope": "internal_only"}'
    return files


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            (root / name).unlink(missing_ok=True)
        else:
            (root / name).write_text(text)
    link = root / "public" / "plan-link.md"
    if not link.is_symlink():
        os.symlink("../internal/plan.md", link)
    return root


class Run:
    """Runs CLI commands against one store; keeps everything printed."""

    def __init__(self, store: Path):
        self.store, self.printed = store, []

    def __call__(self, *args: str, code: int = 0, store: bool = True) -> str:
        result = CliRunner().invoke(main, [*args, *(["--store", str(self.store)] if store else [])])
        self.printed.append(result.output)
        assert result.exit_code == code, (args, result.output, result.exception)
        return result.output


def answers(store: CorpusStore) -> list[dict]:
    chunks = store.read_chunks("v1", columns=["chunk_id", "text", "source_path"])

    def cid(words: str) -> str:  # the real file's chunk, not the link's copy
        found = chunks.filter(
            pl.col("text").str.contains(words, literal=True) & (pl.col("source_path") != "public/plan-link.md")
        )
        return found["chunk_id"].item()

    return [
        {
            "answer_id": "public",
            "answer": "Deploys wait for review [1]. Rollbacks are rehearsed [2]. Budgets are reviewed [3].",
            "corpus_version": "v1",
            "references": [
                {"ref": 1, "chunk_id": cid("Deploys run"), "quote": PUBLIC},
                {"ref": 2, "chunk_id": cid("Rollbacks"), "quote": MOVED},
                {"ref": 3, "chunk_id": cid("Quarterly budget")},
            ],
        },
        {
            "answer_id": "internal",
            "answer": "...",
            "corpus_version": "v1",
            "claims": [
                {"text": "The plan has a code name.", "citations": [{"chunk_id": cid("acquisition")}]},
                {
                    "text": "Owners sign off.",
                    "citations": [{"chunk_id": cid("Budget owners"), "quote": "Budget owners sign off on"}],
                },
            ],
        },
        {
            "answer_id": "restricted",
            "answer": "...",
            "corpus_version": "v1",
            "claims": [
                {
                    "text": "Annual plans get a discount.",
                    "citations": [{"chunk_id": cid("discount applies"), "quote": f"The {CANARY} discount"}],
                },
                {
                    "text": "Seats rose.",
                    "citations": [{"chunk_id": cid("Weekly active seats"), "quote": f"seats of {CANARY} rose"}],
                },
            ],
        },
    ]


ANTHROPIC_ANSWER = {
    "answer_id": "from-api",
    "corpus_version": "v1",
    "documents": [{"source_path": "internal/plan.md"}, {"source_path": "public/guide.md"}],
    "response": {
        "type": "message",
        "role": "assistant",
        "content": [
            {
                "type": "text",
                "text": "The plan has a code name.",
                "citations": [
                    {
                        "type": "char_location",
                        "cited_text": f"The acquisition is code-named {CANARY} in every memo.",
                        "document_index": 0,
                    }
                ],
            },
            {
                "type": "text",
                "text": " Deploys wait for review.",
                "citations": [{"type": "char_location", "cited_text": PUBLIC, "document_index": 1}],
            },
        ],
    },
}
# A public answer quoting internal text as if a public page said it: the quote anchors nowhere in that page, and
# is withheld all the same, because it is internal_only text of the version.
UNANCHORED_ANSWER = {
    "answer_id": "claims-public",
    "corpus_version": "v1",
    "documents": [{"source_path": "public/guide.md"}],
    "response": {
        "type": "message",
        "role": "assistant",
        "content": [
            {
                "type": "text",
                "text": "The plan has a code name.",
                "citations": [
                    {
                        "type": "char_location",
                        "cited_text": f"The acquisition is code-named {CANARY} in every memo.",
                        "document_index": 0,
                    }
                ],
            }
        ],
    },
}
# ... and quoting the redacted and the aggregate_only page the same way: withheld at their levels.
QUOTED_ELSEWHERE = {
    "claims-redacted": f"The {CANARY} discount applies to annual plans only.",
    "claims-aggregate": f"Weekly active seats of {CANARY} rose by a tenth.",
}
UNANCHORED_ELSEWHERE = [
    {
        **UNANCHORED_ANSWER,
        "answer_id": answer_id,
        "response": {
            "type": "message",
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "Something was said.",
                    "citations": [{"type": "char_location", "cited_text": quote, "document_index": 0}],
                }
            ],
        },
    }
    for answer_id, quote in QUOTED_ELSEWHERE.items()
]


def shared_files(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if p.is_file()]


def leaks(path: Path, secrets: tuple[str, ...] = (CANARY,)) -> bool:
    data = path.read_bytes()
    if any(secret.encode() in data for secret in secrets):
        return True
    if path.suffix == ".parquet":  # compressed pages: read the values
        values = json.dumps(pl.read_parquet(path).to_dicts(), default=str)
        return any(secret in values for secret in secrets)
    return False


def aggregate_doc_ids(store: CorpusStore) -> tuple[str, ...]:
    docs = pl.concat(store.read_documents(v, columns=["doc_id", "access_scope"]) for v in ("v1", "v2"))
    ids = tuple(docs.filter(pl.col("access_scope") == "aggregate_only")["doc_id"].unique())
    assert ids
    return ids


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("canary")
    store_dir, out = base / "store", base / "out"
    run = Run(store_dir)
    run("ingest", str(write(base / "src", tree(1))), "--version", "v1", "--workers", "1")
    (base / "answers.jsonl").write_text("\n".join(json.dumps(a) for a in answers(CorpusStore(store_dir))) + "\n")
    run("answers", "add", str(base / "answers.jsonl"))
    api_answers = [ANTHROPIC_ANSWER, UNANCHORED_ANSWER, *UNANCHORED_ELSEWHERE]
    (base / "anthropic.jsonl").write_text("".join(json.dumps(answer) + "\n" for answer in api_answers))
    run("answers", "add", str(base / "anthropic.jsonl"), "--from", "anthropic")  # the response itself quotes the canary
    run("ingest", str(write(base / "src", tree(2))), "--version", "v2", "--workers", "1")
    run("versions")
    run("versions", "--json")
    for table in ("chunks", "documents", "errors"):
        run("export", table, "--version", "v2", "--out", str(out / f"{table}.parquet"))
    run("diff", "v1", "v2", "--out", str(out / "diff.parquet"))
    run("diff", "v1", "v2", "--json")
    run("stale", "--against", "v2", "--out", str(out / "status.parquet"), "--report", str(out / "report.html"))
    run("repair", "--against", "v2", "--out", str(out / "repaired.jsonl"), "--min-score", "0.5", "--apply")
    run("repair", "--against", "v2", "--json", "--min-score", "0.5")
    run("stale", "--against", "v2", "--out", str(out / "status-after.parquet"))
    for answer_id in ("public", "internal", "restricted"):
        run("history", answer_id)
        (out / f"history-{answer_id}.json").write_text(run("history", answer_id, "--json"))
    run("verify", "--no-model", "--version", "v2", "--out", str(out / "verify"))
    run("verify", "--no-model", "--version", "v2", "--out", str(out / "verify"), "--shard", "0/2", "--run-id", "s")
    run("verify", "--no-model", "--version", "v2", "--out", str(out / "verify"), "--shard", "1/2", "--run-id", "s")
    run("verify-merge", "--out", str(out / "verify"), "--version", "v2", "--run-id", "s", store=False)
    run("answers", "list")
    for answer_id in ("public", "internal", "claims-public", "restricted", *QUOTED_ELSEWHERE):
        run("answers", "show", answer_id)
    run("answers", "export", "--out", str(out / "answers.parquet"))
    run("gc", "--keep-last", "5", "--dry-run")
    return {"base": base, "store": CorpusStore(store_dir), "out": out, "run": run}


def test_no_cli_output_file_or_printed_line_holds_the_canary(world):
    store = world["store"]
    docs = store.read_documents("v2", columns=["source_path", "access_scope"])
    internal = set(docs.filter(pl.col("access_scope") == "internal_only")["source_path"])
    assert {
        "internal/plan.md",
        "internal/memo.md",
        "internal/board.md",
        "public/plan-link.md",
        "public/later.md",
    } <= internal
    assert dict(docs.filter(pl.col("source_path").str.contains("pricing|metrics")).iter_rows()) == {
        "redacted/pricing.md": "redacted",
        AGGREGATE_PATH: "aggregate_only",
    }
    report = store.layout.citation_status_file("v2").parent / "report.html"
    files = [*shared_files(world["out"]), report] if report.exists() else shared_files(world["out"])
    secrets = (CANARY, *aggregate_doc_ids(store))
    assert [p for p in files if leaks(p, secrets)] == []
    printed = "".join(world["run"].printed)
    assert [secret for secret in secrets if secret in printed] == []


def test_a_redacted_source_shows_its_title_link_and_summary_an_aggregate_one_only_counts(world):
    report = (world["out"] / "report.html").read_text()
    assert f"{PRICING_TITLE} — {PRICING_URL} — {PRICING_SUMMARY}" in report
    assert f"{PRICING_TITLE} — {PRICING_URL} — {PRICING_SUMMARY}" in world["run"]("answers", "show", "restricted")
    assert "an aggregate_only source: counted, never quoted" in report
    rows = (
        pl.read_parquet(world["out"] / "answers.parquet")
        .filter(pl.col("answer_id") == "restricted")
        .sort("claim_index")
    )
    shown = rows.select("access_scope", "title", "source_url", "summary", "source_path").rows()
    assert shown == [
        ("redacted", PRICING_TITLE, PRICING_URL, PRICING_SUMMARY, "redacted/pricing.md"),
        ("aggregate_only", AGGREGATE_MARK, AGGREGATE_MARK, None, AGGREGATE_MARK),
    ]
    assert rows["quote"].to_list() == [WITHHELD_TEXT["redacted"], WITHHELD_TEXT["aggregate_only"]]
    status = pl.read_parquet(world["out"] / "status.parquet").filter(pl.col("answer_id") == "restricted")
    assert set(status["access_scope"]) == {"redacted", "aggregate_only"} and status.height == 2


def test_a_public_citation_is_never_re_pointed_into_internal_text(world):
    repairs = pl.read_parquet(world["store"].layout.repairs_file("v2"))
    public = {
        r["old_quote"] or r["old_chunk_id"]: r
        for r in repairs.filter(pl.col("answer_id") == "public").iter_rows(named=True)
    }
    assert public[MOVED]["repair"] == "unresolved" and public[MOVED]["new_chunk_id"] is None
    assert public[MOVED]["reason"].endswith("evidence is now only in text of a stricter level")
    status = pl.read_parquet(world["out"] / "status.parquet")
    moved = status.filter(pl.col("quote") == MOVED).row(0, named=True)
    assert (
        moved["status"] in ("stale", "removed") and moved["suggested_chunk_id"] is None and moved["evidence_internal"]
    )
    stored = [json.loads(line) for line in world["store"].layout.repaired_answers_file("v2").read_text().splitlines()]
    assert CANARY not in json.dumps([r for r in stored if r["answer_id"] == "public"])


def test_the_raw_text_flag_includes_it_and_says_so(world, tmp_path):
    run = world["run"]
    run("stale", "--against", "v2", "--out", str(tmp_path / "raw.parquet"), "--include-internal-text")
    run("export", "chunks", "--version", "v2", "--out", str(tmp_path / "chunks.parquet"), "--include-internal-text")
    for name in ("raw.parquet", "chunks.parquet"):
        assert leaks(tmp_path / name)
        assert pq.read_schema(tmp_path / name).metadata[RAW_TEXT_KEY.encode()] == b"included"
    assert pq.read_schema(world["out"] / "status.parquet").metadata[RAW_TEXT_KEY.encode()] == b"withheld"


def test_no_dagster_asset_or_its_metadata_holds_the_canary(tmp_path):
    base = tmp_path
    store_dir = base / "store"
    instance = dg.DagsterInstance.ephemeral()
    assets = [
        ingest_assets.ingested_corpus,
        citation_assets.chunk_diff,
        citation_assets.citation_status,
        citation_assets.repaired_answers,
        citation_assets.stale_report,
        verification_assets.verification,
        *dg.load_asset_checks_from_modules([ingest_assets, citation_assets, verification_assets]),
    ]
    seen = []
    for version in (1, 2):
        name = f"v{version}"
        instance.add_dynamic_partitions(corpus_versions.name, [name])
        source = write(base / f"src{version}", tree(version))
        if version == 2:
            answers_path = base / "answers.jsonl"
            answers_path.write_text("\n".join(json.dumps(a) for a in answers(CorpusStore(store_dir))) + "\n")
        config = settings(
            store_dir=str(store_dir),
            source_dir=str(source),
            parse_workers=1,
            answers_path=str(answers_path) if version == 2 else None,
        )
        result = dg.materialize(
            assets,
            instance=instance,
            partition_key=name,
            resources=config.resources(),
            run_config={"ops": {"repaired_answers": {"config": {"apply": True, "min_score": 0.5}}}},
        )
        assert result.success
        for event in result.all_events:
            seen.append(str(event.event_specific_data))
        seen += [str(e.materialization.metadata) for e in result.get_asset_materialization_events()]
        seen += [str(e.metadata) for e in result.get_asset_check_evaluations()]
    store = CorpusStore(store_dir)
    secrets = (CANARY, *aggregate_doc_ids(store))
    assert [secret for secret in secrets if secret in "\n".join(seen)] == []
    assert not leaks(store.layout.citation_status_file("v2").parent / "report.html", secrets)


def test_an_unanchored_quote_of_internal_text_is_withheld_and_says_why(world):
    shown = world["run"]("answers", "show", "claims-public")
    assert "withheld" in shown and CANARY not in shown
    rows = pl.read_parquet(world["out"] / "answers.parquet").filter(pl.col("answer_id") == "claims-public")
    (row,) = rows.iter_rows(named=True)
    assert (row["anchored_by"], row["chunk_id"], row["access_scope"]) == ("unanchored", None, "internal_only")
    assert row["anchor_note"].endswith("the quote is internal_only text of 'v1', so it is withheld")
    status = pl.read_parquet(world["out"] / "status.parquet").filter(pl.col("answer_id") == "claims-public")
    assert status["status"].to_list() == ["invalid"] and status["quote"].to_list() == [REDACTED]


def test_an_unanchored_quote_of_redacted_or_aggregate_text_is_withheld_at_its_level(world):
    rows = pl.read_parquet(world["out"] / "answers.parquet").filter(pl.col("answer_id").is_in(list(QUOTED_ELSEWHERE)))
    found = {r["answer_id"]: (r["access_scope"], r["quote"]) for r in rows.iter_rows(named=True)}
    assert found == {
        "claims-redacted": ("redacted", WITHHELD_TEXT["redacted"]),
        "claims-aggregate": ("aggregate_only", WITHHELD_TEXT["aggregate_only"]),
    }
    status = pl.read_parquet(world["out"] / "status.parquet").filter(pl.col("answer_id").is_in(list(QUOTED_ELSEWHERE)))
    assert sorted(status["quote"].to_list()) == sorted([WITHHELD_TEXT["redacted"], WITHHELD_TEXT["aggregate_only"]])


def test_no_backfill_line_or_job_metadata_holds_the_canary(tmp_path):
    """The same two trees as two tagged commits of a git repository, ingested through its listing: backfill's
    printed lines and the backfill job's events and metadata name no withheld text and no aggregate_only doc_id."""
    repo = tmp_path / "repo"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for version in (1, 2):
        write(repo, tree(version))
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", f"v{version}"], check=True)
        subprocess.run([*git, "tag", f"v{version}"], check=True)
    run = Run(tmp_path / "cli-store")
    run("backfill", str(repo), "--refs", "v*", "--workers", "1")
    run("ingest", f"git:{repo}@v2", "--version", "again", "--workers", "1")  # equals v2: no version, one line

    job_store = tmp_path / "job-store"
    resources = settings(store_dir=str(job_store), parse_workers=1).resources()
    with dg.instance_for_test() as instance:
        result = backfill.backfill_job.execute_in_process(
            instance=instance,
            resources=resources,
            run_config={"ops": {"backfill_tags": {"config": {"repository": str(repo), "refs": "v*"}}}},
        )
        seen = [str(event.event_specific_data) for event in result.all_events]  # the materializations' metadata too
    stores = [CorpusStore(tmp_path / "cli-store"), CorpusStore(job_store)]
    assert [[m.name for m in store.versions()] for store in stores] == [["v1", "v2"], ["v1", "v2"]]
    secrets = (CANARY, *aggregate_doc_ids(stores[0]))
    assert AGGREGATE_PATH in aggregate_doc_ids(stores[0])  # the listing read its front matter's scope
    assert [s for s in secrets if s in "".join(run.printed)] == []
    assert any("n_quarantined" in line for line in seen)  # the materializations' metadata was looked at
    assert [s for s in secrets if s in "\n".join(seen)] == []
