"""Every table citekeeper writes, as pyarrow schemas. Parquet is always written with these."""
from __future__ import annotations

import pyarrow as pa

TIMESTAMP = pa.timestamp("us", tz="UTC")

# ---------------------------------------------------------------- ingest (issue 2)

CHUNKS = pa.schema(
    [
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("corpus_version", pa.string(), nullable=False),
        pa.field("doc_content_hash", pa.string(), nullable=False),
        pa.field("ordinal", pa.int32(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("text_hash", pa.string(), nullable=False),
        pa.field("start_char", pa.int64(), nullable=False),
        pa.field("end_char", pa.int64(), nullable=False),
        pa.field("page_start", pa.int32()),
        pa.field("page_end", pa.int32()),
        pa.field("section_path", pa.list_(pa.string())),
        pa.field("element_types", pa.list_(pa.string())),
        pa.field("source_path", pa.string(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("filetype", pa.string(), nullable=False),
        pa.field("access_scope", pa.string(), nullable=False),
        pa.field("ingested_at", TIMESTAMP, nullable=False),
    ]
)

DOCUMENTS = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("corpus_version", pa.string(), nullable=False),
        pa.field("doc_content_hash", pa.string(), nullable=False),
        pa.field("source_path", pa.string(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("filetype", pa.string(), nullable=False),
        pa.field("access_scope", pa.string(), nullable=False),
        pa.field("size_bytes", pa.int64(), nullable=False),
        pa.field("n_chunks", pa.int32(), nullable=False),
        pa.field("text", pa.string(), nullable=False),  # canonical text; chunk offsets index into it
        pa.field("ingested_at", TIMESTAMP, nullable=False),
    ]
)

INGEST_ERRORS = pa.schema(
    [
        pa.field("corpus_version", pa.string(), nullable=False),
        pa.field("source_path", pa.string(), nullable=False),
        pa.field("stage", pa.string(), nullable=False),  # discover | read | parse | chunk
        pa.field("error_type", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("occurred_at", TIMESTAMP, nullable=False),
    ]
)

# ---------------------------------------------------------------- answers (issue 3)
# Stored under <store>/answers/. Every (answer_id, revision) is kept; the highest revision is current.

ANSWERS = pa.schema(
    [
        pa.field("answer_id", pa.string(), nullable=False),
        pa.field("revision", pa.int32(), nullable=False),
        pa.field("question", pa.string()),
        pa.field("answer", pa.string(), nullable=False),
        pa.field("corpus_version", pa.string(), nullable=False),  # version the answer cited
        pa.field("created_at", TIMESTAMP),
        pa.field("content_hash", pa.string(), nullable=False),
        pa.field("input_form", pa.string(), nullable=False),  # structured | marker
        pa.field("source_file", pa.string()),
        pa.field("registered_at", TIMESTAMP, nullable=False),
    ]
)

CLAIMS = pa.schema(
    [
        pa.field("answer_id", pa.string(), nullable=False),
        pa.field("revision", pa.int32(), nullable=False),
        pa.field("claim_id", pa.string(), nullable=False),
        pa.field("claim_index", pa.int32(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("text_hash", pa.string(), nullable=False),
        pa.field("n_citations", pa.int32(), nullable=False),  # 0 -> the claim is uncited
        pa.field("source_claim_id", pa.string()),  # claim_id as given in structured input
    ]
)

CITATIONS = pa.schema(
    [
        pa.field("answer_id", pa.string(), nullable=False),
        pa.field("revision", pa.int32(), nullable=False),
        pa.field("claim_id", pa.string(), nullable=False),
        pa.field("citation_id", pa.string(), nullable=False),
        pa.field("citation_index", pa.int32(), nullable=False),
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("quote", pa.string()),  # verbatim evidence span; null -> the whole chunk
        pa.field("cited_text_hash", pa.string()),  # chunk text_hash seen at citation time
        pa.field("corpus_version", pa.string(), nullable=False),
    ]
)

# One row per citation, judged against a target version. All *_start_char/*_end_char are offsets into
# the document's canonical text of that version: the quote's span when there is a quote, else the chunk's.
CITATION_STATUS = pa.schema(
    [
        pa.field("target_version", pa.string(), nullable=False),
        pa.field("answer_id", pa.string(), nullable=False),
        pa.field("revision", pa.int32(), nullable=False),
        pa.field("claim_id", pa.string(), nullable=False),
        pa.field("citation_id", pa.string(), nullable=False),
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("cited_version", pa.string(), nullable=False),
        pa.field("doc_id", pa.string()),
        pa.field("status", pa.string(), nullable=False),  # valid|relocated|drifted|stale|removed|invalid
        pa.field("reason", pa.string(), nullable=False),
        pa.field("quote", pa.string()),
        pa.field("old_start_char", pa.int64()),
        pa.field("old_end_char", pa.int64()),
        pa.field("old_text_hash", pa.string()),
        pa.field("new_chunk_id", pa.string()),
        pa.field("new_doc_id", pa.string()),
        pa.field("new_start_char", pa.int64()),
        pa.field("new_end_char", pa.int64()),
        pa.field("new_text_hash", pa.string()),
        pa.field("similarity", pa.float64()),
        pa.field("suggested_chunk_id", pa.string()),
        pa.field("suggested_start_char", pa.int64()),
        pa.field("suggested_end_char", pa.int64()),
        pa.field("suggested_score", pa.float64()),
        pa.field("suggested_method", pa.string()),  # exact | fuzzy | hybrid
        # Evidence text, so a report (or an NLI verifier) can be built from this Parquet alone.
        pa.field("source_path", pa.string()),  # cited document, at the cited version
        pa.field("new_source_path", pa.string()),
        pa.field("access_scope", pa.string()),  # of the cited chunk; internal_only is redacted in reports
        pa.field("new_access_scope", pa.string()),
        pa.field("old_text", pa.string()),  # cited chunk text at the cited version
        pa.field("new_text", pa.string()),  # successor chunk text in the target version
        pa.field("suggested_text", pa.string()),  # text of the suggested replacement span
    ]
)


# ---------------------------------------------------------------- diff (issue 3)
# Stored under <store>/diffs/<old>__<new>/. Chunk rows cover the documents that changed (every chunk of
# them, unchanged ones included); chunks of untouched documents are summarised by doc_diff only.

CHUNK_CHANGES = ("unchanged", "moved", "relocated", "modified", "removed", "added")
DOC_CHANGES = ("unchanged", "added", "removed", "renamed", "modified")

CHUNK_DIFF = pa.schema(
    [
        pa.field("old_version", pa.string(), nullable=False),
        pa.field("new_version", pa.string(), nullable=False),
        pa.field("change", pa.string(), nullable=False),  # one of CHUNK_CHANGES
        pa.field("old_chunk_id", pa.string()),
        pa.field("new_chunk_id", pa.string()),
        pa.field("old_doc_id", pa.string()),
        pa.field("new_doc_id", pa.string()),
        pa.field("old_start_char", pa.int64()),
        pa.field("old_end_char", pa.int64()),
        pa.field("new_start_char", pa.int64()),
        pa.field("new_end_char", pa.int64()),
        pa.field("old_text_hash", pa.string()),
        pa.field("new_text_hash", pa.string()),
        pa.field("similarity", pa.float64()),  # 1.0 for same text; text ratio for modified
    ]
)

DOC_DIFF = pa.schema(
    [
        pa.field("old_version", pa.string(), nullable=False),
        pa.field("new_version", pa.string(), nullable=False),
        pa.field("change", pa.string(), nullable=False),  # one of DOC_CHANGES
        pa.field("old_doc_id", pa.string()),
        pa.field("new_doc_id", pa.string()),
        pa.field("old_source_path", pa.string()),
        pa.field("new_source_path", pa.string()),
        pa.field("old_content_hash", pa.string()),
        pa.field("new_content_hash", pa.string()),
    ]
)

# Per changed document of a target version: how much registered work rests on it. Stored next to
# citation_status.parquet.
BLAST_RADIUS = pa.schema(
    [
        pa.field("target_version", pa.string(), nullable=False),
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("source_path", pa.string()),
        pa.field("change", pa.string(), nullable=False),
        pa.field("n_answers", pa.int64(), nullable=False),
        pa.field("n_claims", pa.int64(), nullable=False),
        pa.field("n_citations", pa.int64(), nullable=False),  # citations on it that are no longer valid
        pa.field("n_citations_total", pa.int64(), nullable=False),
    ]
)
