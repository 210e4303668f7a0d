"""Verification against the store: the current answers (or an answers file) checked against a corpus version."""
from __future__ import annotations

from pathlib import Path

from citekeeper.answer_store import AnswerStore
from citekeeper.store import CorpusStore
from verifiers.engine import VerifyResult, VerifySettings, new_run_id, verify
from verifiers.evidence import answers_from_file, citation_evidence, read_citation_status
from verifiers.nli import Scorer
from verifiers.verdict_cache import VerdictCache
from verifiers.verify_output import write_outputs


def verify_store(
    store_root: Path | str | CorpusStore,
    out_dir: Path | str,
    version: str | None = None,
    answers_file: Path | str | None = None,
    scorer: Scorer | None = None,
    settings: VerifySettings = VerifySettings(),
    run_id: str | None = None,
) -> tuple[VerifyResult, dict[str, Path]]:
    """Verify the current answers (or those of `answers_file`) against `version` (default: the latest) and
    write the Parquet tables; verdicts are cached under <store>/verify/cache."""
    store = store_root if isinstance(store_root, CorpusStore) else CorpusStore(store_root)
    version = store.version_or_latest(version)
    if answers_file is not None:
        claims, citations = answers_from_file(answers_file)
    else:
        answers = AnswerStore(store.root).snapshot()  # claims and citations of one commit
        claims, citations = answers.claims(), answers.citations()
    chunks = store.read_chunks(version, columns=["chunk_id", "doc_id", "text", "start_char"])
    evidence = citation_evidence(citations, chunks, read_citation_status(store.root, version))
    cache = VerdictCache(store.layout.verdict_cache_dir) if scorer is not None else None
    run_id = run_id or new_run_id()
    result = verify(claims, evidence, version, scorer, settings, cache, run_id)
    if cache is not None:
        cache.flush(run_id)
    return result, write_outputs(result, out_dir)
