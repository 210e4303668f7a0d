"""Every table citekeeper writes, as pyarrow schemas. Parquet is always written with these."""

from __future__ import annotations

import pyarrow as pa

TIMESTAMP = pa.timestamp("us", tz="UTC")

# ---------------------------------------------------------------- ingest (issue 2)

# An e-mail's own header (null for other formats), on the document and on each of its chunks.
EMAIL_FIELDS = (
    pa.field("email_subject", pa.string()),
    pa.field("email_from", pa.string()),
    pa.field("email_date", pa.string()),  # ISO 8601, as the message gives it
)

# A document's source model (issue 31; docs/answers.md, "Sources"): what it is, where a reader finds it, when it was
# published and updated, how far it is trusted, who may read it and what it is about. Read from front matter,
# sidecars or the configured mapping (citekeeper.sources), null where nothing says; on documents and chunks.
SOURCE_FIELDS = (
    pa.field("source_type", pa.string()),  # e.g. api_docs, guide, email (free text)
    pa.field("source_url", pa.string()),  # the user-facing locator (never the chunk_id): given, or the URL template's
    pa.field("published_at", TIMESTAMP),
    pa.field("updated_at", TIMESTAMP),
    pa.field("authority", pa.string()),  # one of the configured authority levels (citekeeper.sources)
    pa.field("source_version", pa.string()),  # the product/API version the document describes, e.g. "v2"
    pa.field("summary", pa.string()),  # sidecar only: what a `redacted` document shows instead of its text
    pa.field("access_groups", pa.list_(pa.string())),  # null or empty: every audience; else only these groups
    pa.field("scope_labels", pa.list_(pa.string())),  # what it applies to: product, API, region, tenant ... labels
)
# The source fields a status, export or evidence row carries (the summary only where a redacted row shows it).
SOURCE_ROW_FIELDS = tuple(
    f
    for f in SOURCE_FIELDS
    if f.name in ("source_type", "source_url", "published_at", "updated_at", "authority", "source_version")
)

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
        # Format-native locators (null where the format has none). A chunk never spans two slides, sheets
        # or e-mail parts, so each of those is one value per chunk.
        pa.field("slide_number", pa.int32()),  # decks, 1-based
        pa.field("sheet_name", pa.string()),  # workbooks
        pa.field("row_start", pa.int32()),  # spreadsheet rows, 1-based as the sheet numbers them
        pa.field("row_end", pa.int32()),
        *EMAIL_FIELDS,
        pa.field("email_part", pa.string()),  # "body" or the attachment's file name
        pa.field("ocr", pa.bool_()),  # the chunk's text (some of it) was recognised from pixels
        pa.field("source_path", pa.string(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("filetype", pa.string(), nullable=False),
        pa.field("access_scope", pa.string(), nullable=False),
        *SOURCE_FIELDS,
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
        pa.field("encoding", pa.string()),  # what a text format was decoded from; null for binary formats
        pa.field("front_matter", pa.string()),  # the whole front matter as JSON; null when the file has none
        *SOURCE_FIELDS,
        *EMAIL_FIELDS,
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
        # The file's visibility level where known (its discovered one; else the strictest of an override and a
        # readable sidecar for its path): an aggregate_only file's path and reason are withheld where shared.
        pa.field("access_scope", pa.string()),
    ]
)

# One row per document a staged shard saw (staging/<version>/shard-i-of-n/sources.parquet).
STAGED_SOURCES = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("source_path", pa.string(), nullable=False),
        pa.field("content_hash", pa.string(), nullable=False),
        pa.field("outcome", pa.string(), nullable=False),  # parsed | reused | failed
    ]
)

# What discovery read of a listed source's objects (an object store, a git ref), kept under
# <store>/cache/sources/ by the source's cache key: an object listed again with the same stamp is not read again.
# A cache: losing it costs reads, never a wrong result.
READ_OBJECTS = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("stamp", pa.string(), nullable=False),
        pa.field("content_hash", pa.string(), nullable=False),
        pa.field("size_bytes", pa.int64(), nullable=False),
        # A document's front matter block (parsers.metadata.front_matter_head) or a sidecar's bytes; null: none.
        pa.field("head", pa.binary()),
        # The parse settings (config_hash) under which the document parsed into no text to cite, if it did: it
        # is not read and parsed again under them while its stamp stays.
        pa.field("no_text_under", pa.string()),
        # When the bytes were read (ns since the epoch): a file modified within RACY_WINDOW_NS of it is read again,
        # as its stamp could have missed a second write (parsers.discover).
        pa.field("read_at_ns", pa.int64()),
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
        pa.field("input_form", pa.string(), nullable=False),  # structured | marker | a response format (--from)
        pa.field("source_file", pa.string()),
        pa.field("source_record", pa.string()),  # the input record (or an API's response in its envelope) as JSON
        pa.field("repaired_from", pa.int32()),  # a repair's revision: the revision it was made from
        # Who the answer was given to: its citations of documents outside these access_groups are out_of_scope
        # (null: no audience given, nothing checked).
        pa.field("audience", pa.list_(pa.string())),
        pa.field("about_version", pa.string()),  # the product/API version the question is about (source_version)
        pa.field("scope_labels", pa.list_(pa.string())),  # what the question is about (matched with documents')
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
        pa.field("status", pa.string(), nullable=False),  # cited | uncited (a marker-form sentence without markers)
    ]
)

CITATIONS = pa.schema(
    [
        pa.field("answer_id", pa.string(), nullable=False),
        pa.field("revision", pa.int32(), nullable=False),
        pa.field("claim_id", pa.string(), nullable=False),
        pa.field("citation_id", pa.string(), nullable=False),
        pa.field("citation_index", pa.int32(), nullable=False),
        pa.field("chunk_id", pa.string()),  # null: cited by document, and registration could not anchor it
        pa.field("quote", pa.string()),  # verbatim evidence span; null -> the whole chunk
        pa.field("cited_text_hash", pa.string()),  # chunk text_hash seen at citation time
        pa.field("corpus_version", pa.string(), nullable=False),
        # How registration found the chunk (citekeeper.answers.anchoring.ANCHOR_METHODS): chunk_id when the citation
        # named it.
        pa.field("anchored_by", pa.string()),
        pa.field("anchor_score", pa.float64()),  # fuzzy: the match's similarity in [0, 1]
        pa.field("anchor_note", pa.string()),  # unanchored: why
        pa.field("given_index", pa.int32()),  # the citation as given in its claim (a quote across chunks: several rows)
        pa.field("cited_doc_id", pa.string()),  # a citation by document: the doc_id or source_path it named
        pa.field("cited_source_path", pa.string()),
        # unanchored: the strictest level of the withheld texts of the version it cites that hold its quote (then
        # withheld like any internal quote); null otherwise
        pa.field("quote_access_scope", pa.string()),
        # When the RAG system read the evidence: as the input gives it, else the answer's created_at.
        pa.field("retrieved_at", TIMESTAMP),
    ]
)

# `citekeeper answers export`: one row per citation of every current answer (an uncited claim: one row with
# null citation columns), located in the version it cites.
ANSWER_EXPORT = pa.schema(
    [
        pa.field("answer_id", pa.string(), nullable=False),
        pa.field("revision", pa.int32(), nullable=False),
        pa.field("claim_id", pa.string(), nullable=False),
        pa.field("claim_index", pa.int32(), nullable=False),
        pa.field("claim_text", pa.string(), nullable=False),
        pa.field("claim_status", pa.string(), nullable=False),  # cited | uncited (CLAIMS.status)
        pa.field("citation_id", pa.string()),
        pa.field("citation_index", pa.int32()),
        pa.field("cited_version", pa.string()),
        pa.field("chunk_id", pa.string()),
        pa.field("doc_id", pa.string()),  # of the chunk at the cited version; null: not in it
        pa.field("source_path", pa.string()),
        pa.field("locator", pa.string()),  # the chunk's native locator line (citekeeper.native_locator)
        pa.field("quote", pa.string()),  # withheld (citekeeper.scope.REDACTED) for internal_only text unless asked
        pa.field("start_char", pa.int64()),  # the quote's span (else the chunk's) in the document at the cited version
        pa.field("end_char", pa.int64()),
        pa.field(
            "anchored_by", pa.string()
        ),  # how registration found the chunk: chunk_id | exact | normalized | fuzzy | ...
        pa.field("anchor_score", pa.float64()),
        pa.field("needs_review", pa.bool_()),  # anchored by fuzzy match or offsets alone: a person should look
        pa.field("anchor_note", pa.string()),  # unanchored: why
        pa.field("quote_match", pa.string()),  # exact | normalized | null (no quote, or not in the chunk)
        pa.field("access_scope", pa.string()),
        pa.field("title", pa.string()),  # withheld for aggregate_only documents
        pa.field("summary", pa.string()),  # a redacted document's sidecar summary
        *SOURCE_ROW_FIELDS,
        pa.field("retrieved_at", TIMESTAMP),
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
        pa.field("chunk_id", pa.string()),  # null: cited by document and not anchored (invalid)
        pa.field("cited_version", pa.string(), nullable=False),
        pa.field("doc_id", pa.string()),
        pa.field("status", pa.string(), nullable=False),  # changes.statuses.NAMES
        pa.field("reason", pa.string(), nullable=False),
        pa.field("quote", pa.string()),
        # how the quote was found in the cited chunk (citekeeper.locate): exact | normalized; null: no quote
        # or not found (then the status is invalid)
        pa.field("quote_match", pa.string()),
        # how the evidence was found in the successor chunk: exact | normalized; null: not in it
        pa.field("new_match", pa.string()),
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
        pa.field("suggested_method", pa.string()),  # exact | normalized | fuzzy | hybrid | fts (changes.reanchor)
        # Did re-anchoring search for a lost (changes.statuses.LOST) citation's evidence: false after
        # `stale --no-reanchor` (readers that need suggestions re-anchor those rows); null for the statuses never
        # re-anchored.
        pa.field("reanchored", pa.bool_()),
        # A user_visible citation's lost evidence is found only in internal_only text: never suggested, never repaired.
        pa.field("evidence_internal", pa.bool_()),
        # Evidence text, so a report (or an NLI verifier) can be built from this Parquet alone.
        pa.field("source_path", pa.string()),  # cited document, at the cited version
        pa.field("new_source_path", pa.string()),
        # format-native locators as a line, e.g. "slide 2", "sheet Q3 · rows 5–9" (citekeeper.native_locator)
        pa.field("old_locator", pa.string()),
        pa.field("new_locator", pa.string()),
        pa.field("access_scope", pa.string()),  # of the cited chunk; internal_only is redacted in reports
        pa.field("new_access_scope", pa.string()),
        pa.field("old_text", pa.string()),  # cited chunk text at the cited version
        pa.field("new_text", pa.string()),  # successor chunk text in the target version
        pa.field("suggested_text", pa.string()),  # text of the suggested replacement span
        pa.field("suggested_source_path", pa.string()),
        pa.field("suggested_access_scope", pa.string()),
        # The document's source fields, at the target version (else the cited one); title and summary as shown.
        pa.field("title", pa.string()),
        pa.field("summary", pa.string()),
        *SOURCE_ROW_FIELDS,
        pa.field("retrieved_at", TIMESTAMP),  # the citation's
        pa.field("updated_after_retrieval", pa.bool_()),  # the document's updated_at is later than retrieved_at
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

# ---------------------------------------------------------------- repair
# One row per current citation judged against a target version: what repair did to it (changes.repair).
# Stored as <store>/repairs/target_version=<v>/repairs.parquet.

REPAIRS = pa.schema(
    [
        pa.field("target_version", pa.string(), nullable=False),
        pa.field("answer_id", pa.string(), nullable=False),
        pa.field("from_revision", pa.int32(), nullable=False),
        pa.field("to_revision", pa.int32()),  # the revision --apply registered; null when not applied
        pa.field("claim_id", pa.string(), nullable=False),
        pa.field("claim_index", pa.int32(), nullable=False),
        pa.field("citation_id", pa.string(), nullable=False),
        pa.field("citation_index", pa.int32(), nullable=False),
        pa.field("status", pa.string(), nullable=False),  # changes.statuses.NAMES
        pa.field("repair", pa.string(), nullable=False),  # changes.repair.REPAIR_KINDS
        pa.field("needs_review", pa.bool_(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("score", pa.float64()),  # the suggestion's score, for repairs that used one
        pa.field("method", pa.string()),  # the suggestion's method (changes.reanchor)
        pa.field("old_chunk_id", pa.string()),  # null: a citation by document registration could not anchor
        pa.field("old_version", pa.string(), nullable=False),
        pa.field("old_start_char", pa.int64()),
        pa.field("old_end_char", pa.int64()),
        pa.field("old_locator", pa.string()),
        pa.field("old_source_path", pa.string()),
        pa.field("old_quote", pa.string()),
        pa.field("new_chunk_id", pa.string()),  # null: not re-pointed
        pa.field("new_version", pa.string(), nullable=False),  # the version the repaired citation cites
        pa.field("new_start_char", pa.int64()),
        pa.field("new_end_char", pa.int64()),
        pa.field("new_locator", pa.string()),
        pa.field("new_source_path", pa.string()),
        pa.field("new_quote", pa.string()),
        pa.field("new_text_hash", pa.string()),
        # The cited or the new chunk is internal_only: shared copies (repair --out) withhold the quotes.
        pa.field("internal_text", pa.bool_(), nullable=False),
        pa.field("applied", pa.bool_(), nullable=False),
    ]
)

# ---------------------------------------------------------------- verification (issue 4)
# Written under <out>/corpus_version=<v>/run_id=<r>/{pairs,claims,answers,run}.parquet.
# Probabilities are null where no model scored (lexical/anchoring tiers, 2-way models have no contradiction
# column); they are never NaN.

CLAIM_STATUSES = (
    "supported",
    "partially_supported",
    "unsupported",
    "contradicted",
    "conflicted",
    "uncited",
    "unverified",
)
VERIFY_TIERS = ("none", "anchoring", "lexical", "nli")
PAIR_LABELS = ("entailment", "neutral", "contradiction", "unverified", "no_evidence")

_RUN_KEYS = [
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("corpus_version", pa.string(), nullable=False),
]
_MODEL = [
    pa.field("model_id", pa.string()),  # null: no model (--no-model)
    pa.field("model_revision", pa.string()),
    pa.field("backend", pa.string()),
    pa.field("precision", pa.string()),  # fp32 | bf16 | fp16 (torch), int8 (onnx), external (callable, http)
    pa.field("checker", pa.string()),  # the protocol: a name in verifiers.checkers.PROTOCOLS
    pa.field("thresholds", pa.string(), nullable=False),  # every threshold/window setting, as one key
]
_PROBS = [
    pa.field("p_entailment", pa.float64()),
    pa.field("p_neutral", pa.float64()),  # not-entailment for 2-way models
    pa.field("p_contradiction", pa.float64()),
]
_STATUS_COUNTS = [pa.field(f"n_{status}", pa.int64(), nullable=False) for status in CLAIM_STATUSES]
# Conflicts (verifiers.conflicts): claims whose citations disagreed, decided by the ranking or left open; and
# citations not judged because their document is outside the answer's audience.
SOURCE_MODEL_COUNTS = ("n_conflicts_decided", "n_conflicts_open", "n_citations_out_of_scope")
_SOURCE_MODEL_COUNTS = [pa.field(name, pa.int64(), nullable=False) for name in SOURCE_MODEL_COUNTS]
_SOURCE_MODEL_RATES = [
    pa.field("decided_by_ranking_rate", pa.float64()),  # n_conflicts_decided / n_claims
    pa.field("open_conflict_rate", pa.float64()),  # n_conflicts_open / n_claims
    pa.field("out_of_scope_rate", pa.float64()),  # n_citations_out_of_scope / n_citations
]
# The ranking S(e,c) = w_a*A + w_t*T + w_s*G + w_v*V - w_x*X of one evidence for its claim, and its terms.
_RANKING = [
    pa.field(name, pa.float64())
    for name in ("rank_score", "rank_authority", "rank_time", "rank_scope", "rank_support", "rank_penalty")
]
_METRICS = [
    pa.field("evidence_coverage", pa.float64()),  # null when the denominator is 0
    pa.field("citation_precision", pa.float64()),
    pa.field("claim_completeness", pa.float64()),
    pa.field("locatability", pa.float64()),
]

# One row per decision: a claim sentence judged against one citation's evidence.
NLI_PAIRS = pa.schema(
    [
        *_RUN_KEYS,
        pa.field("answer_id", pa.string(), nullable=False),
        pa.field("revision", pa.int32(), nullable=False),
        pa.field("claim_id", pa.string(), nullable=False),
        pa.field("sentence_index", pa.int32(), nullable=False),
        pa.field("sentence", pa.string(), nullable=False),
        pa.field("citation_id", pa.string(), nullable=False),
        pa.field("citation_index", pa.int32(), nullable=False),
        pa.field("chunk_id", pa.string()),  # as cited (null: cited by document, not anchored)
        pa.field("citation_status", pa.string()),  # from the citation-status table; null when none was used
        pa.field(
            "anchor", pa.string(), nullable=False
        ),  # exact|normalized|quote_not_found|no_quote|no_chunk|out_of_scope
        pa.field("locatable", pa.bool_(), nullable=False),
        pa.field("evidence_chunk_id", pa.string()),  # chunk of the target version judged (null: no evidence)
        pa.field("doc_id", pa.string()),
        pa.field("evidence_start_char", pa.int64()),  # evidence span, offsets into the document text
        pa.field("evidence_end_char", pa.int64()),
        pa.field("window_start_char", pa.int64()),  # the window that decided, offsets into the document text
        pa.field("window_end_char", pa.int64()),
        pa.field("n_windows", pa.int32()),
        pa.field("label", pa.string(), nullable=False),  # PAIR_LABELS
        pa.field("tier", pa.string(), nullable=False),  # VERIFY_TIERS
        pa.field("score", pa.float64()),  # lexical score or p_entailment of the deciding window
        *_PROBS,
        pa.field("from_cache", pa.bool_(), nullable=False),
        *SOURCE_ROW_FIELDS,
        *_RANKING,
        *_MODEL,
    ]
)

NLI_CLAIMS = pa.schema(
    [
        *_RUN_KEYS,
        pa.field("answer_id", pa.string(), nullable=False),
        pa.field("revision", pa.int32(), nullable=False),
        pa.field("claim_id", pa.string(), nullable=False),
        pa.field("claim_index", pa.int32(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),  # CLAIM_STATUSES
        pa.field("tier", pa.string(), nullable=False),  # VERIFY_TIERS: the tier that decided
        pa.field("reason", pa.string(), nullable=False),
        pa.field("support_score", pa.float64()),  # weakest sentence's best support
        pa.field("p_entailment", pa.float64()),  # weakest sentence's best model entailment
        pa.field("p_contradiction", pa.float64()),  # strongest model contradiction
        pa.field("n_sentences", pa.int32(), nullable=False),
        pa.field("n_sentences_supported", pa.int32(), nullable=False),
        pa.field("n_citations", pa.int32(), nullable=False),
        pa.field("n_citations_supporting", pa.int32(), nullable=False),
        pa.field("n_citations_locatable", pa.int32(), nullable=False),
        pa.field("needs_evidence", pa.bool_(), nullable=False),
        pa.field("traceable", pa.bool_(), nullable=False),
        pa.field("conflict", pa.string()),  # decided | open | null (its citations did not disagree)
        pa.field("conflict_margin", pa.float64()),  # best supporting minus best contradicting rank_score
        *_MODEL,
    ]
)

NLI_ANSWERS = pa.schema(
    [
        *_RUN_KEYS,
        pa.field("answer_id", pa.string(), nullable=False),
        pa.field("revision", pa.int32(), nullable=False),
        pa.field("n_claims", pa.int64(), nullable=False),
        pa.field("n_citations", pa.int64(), nullable=False),
        *_STATUS_COUNTS,
        *_SOURCE_MODEL_COUNTS,
        *_METRICS,
        *_SOURCE_MODEL_RATES,
        pa.field("traceable", pa.bool_(), nullable=False),
    ]
)

NLI_RUNS = pa.schema(
    [
        *_RUN_KEYS,
        pa.field("started_at", TIMESTAMP, nullable=False),
        pa.field("duration_s", pa.float64(), nullable=False),
        pa.field("n_answers", pa.int64(), nullable=False),
        pa.field("n_claims", pa.int64(), nullable=False),
        pa.field("n_citations", pa.int64(), nullable=False),
        pa.field("n_pairs", pa.int64(), nullable=False),
        pa.field("n_unique_pairs", pa.int64(), nullable=False),
        pa.field("lexical_decisions", pa.int64(), nullable=False),
        pa.field("cache_hits", pa.int64(), nullable=False),
        pa.field("model_calls", pa.int64(), nullable=False),  # sequences (sentence x window) through the model
        *_STATUS_COUNTS,
        *_SOURCE_MODEL_COUNTS,
        *_METRICS,
        *_SOURCE_MODEL_RATES,
        pa.field("traceability_rate", pa.float64()),
        pa.field("supported_rate", pa.float64()),  # what --fail-under compares against
        *_MODEL,
    ]
)

# A sharded verification run: each shard writes its tables under <run>/shard=<i>-of-<n>/ with one tally row of
# what the merge adds up into the run row (the numerators of the ratio metrics, the work counters) and the
# 8-byte keys of the distinct (sentence, evidence) pairs it judged (polars hashes: stable within one polars
# version, so every shard of a run must run the same image).
NLI_SHARD_TALLY = pa.schema(
    [
        *_RUN_KEYS,
        pa.field("shard_index", pa.int32(), nullable=False),
        pa.field("shard_count", pa.int32(), nullable=False),
        pa.field("started_at", TIMESTAMP, nullable=False),
        pa.field("n_answers", pa.int64(), nullable=False),
        pa.field("n_claims", pa.int64(), nullable=False),
        pa.field("n_needing_evidence", pa.int64(), nullable=False),
        pa.field("n_covered", pa.int64(), nullable=False),
        pa.field("n_citations", pa.int64(), nullable=False),
        pa.field("n_citations_supporting", pa.int64(), nullable=False),
        pa.field("n_citations_locatable", pa.int64(), nullable=False),
        pa.field("n_traceable", pa.int64(), nullable=False),
        pa.field("n_pairs", pa.int64(), nullable=False),
        pa.field("cache_hits", pa.int64(), nullable=False),
        pa.field("model_calls", pa.int64(), nullable=False),
        *_STATUS_COUNTS,
        *_SOURCE_MODEL_COUNTS,
        *_MODEL,
    ]
)
NLI_PAIR_KEYS = pa.schema(
    [pa.field("pair", pa.uint64(), nullable=False), pa.field("lexical", pa.bool_(), nullable=False)]
)

NLI_CACHE = pa.schema(
    [
        # the merge key of the LanceDB table (verifiers.verdict_cache): a digest of the four key columns below
        pa.field("cache_key", pa.string(), nullable=False),
        pa.field("model_key", pa.string(), nullable=False),  # model id @ revision / backend
        pa.field("settings_key", pa.string(), nullable=False),
        pa.field("claim_hash", pa.string(), nullable=False),
        pa.field("evidence_hash", pa.string(), nullable=False),
        pa.field("p_entailment", pa.float64(), nullable=False),
        pa.field("p_neutral", pa.float64(), nullable=False),
        pa.field("p_contradiction", pa.float64()),
        pa.field("window_start", pa.int64(), nullable=False),  # offsets into the evidence text
        pa.field("window_end", pa.int64(), nullable=False),
        pa.field("n_windows", pa.int32(), nullable=False),
        pa.field("created_at", TIMESTAMP, nullable=False),
    ]
)
