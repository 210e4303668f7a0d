"""Dagster resources, one per concern (store, ingest, answers, verifier), the settings a Definitions is built
from, and how store writers are serialised."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import field_validator, model_validator

from citekeeper.answers.formats import converter
from citekeeper.answers.records import (
    MAX_CITATIONS_PER_ANSWER,
    MAX_CITATIONS_PER_CLAIM,
    MAX_CLAIMS_PER_ANSWER,
    AnswerLimits,
)
from citekeeper.language import DEFAULT_LANGUAGE, validate_language
from citekeeper.settings import DEFAULT_STORE, SAMPLE_CORPUS
from citekeeper.sources import DEFAULT_AUTHORITY_LEVELS
from citekeeper.store import CorpusStore
from parsers.records import ParseConfig, parse_config_of, with_parse_settings
from verifiers.checkers import PROTOCOLS
from verifiers.conflicts import RankingSettings, ranking_settings
from verifiers.devices import DEFAULT_BACKEND, DEFAULT_DEVICE
from verifiers.engine import VerifySettings

if TYPE_CHECKING:
    from citekeeper.search_index import EmbeddingStore

# Store writes are serialised twice over: ops in this pool run one at a time (dagster.yaml `concurrency`),
# and runs carrying this tag run one at a time (`tag_concurrency_limits`); the store's file lock still
# guards against writers outside Dagster.
STORE_WRITER_POOL = "citekeeper_store_writer"
STORE_WRITER_TAG = "citekeeper/store-writer"


class StoreResource(dg.ConfigurableResource):
    """Where the corpus store lives, and what retention keeps of it."""

    store_dir: str = DEFAULT_STORE
    # Object-store locations of the LanceDB tables / Parquet exports (None: under store_dir) and their
    # LanceDB storage options; see citekeeper.locations for the keys.
    lance_uri: str | None = None
    parquet_uri: str | None = None
    storage_options: dict[str, str] = {}
    # Retention (`citekeeper gc`; the weekly maintenance schedule, off by default): keep the last gc_keep_last
    # versions (None: the schedule skips) plus those in gc_keep; the latest and every cited version always stay.
    gc_keep_last: int | None = None
    gc_keep: list[str] = []

    @field_validator("gc_keep_last")
    @classmethod
    def _non_negative(cls, value: int | None) -> int | None:
        if value is not None and value < 0:
            raise ValueError(f"gc_keep_last must be 0 or more, not {value}")
        return value

    @property
    def store_path(self) -> Path:
        return Path(self.store_dir)

    def corpus_store(self) -> CorpusStore:
        return CorpusStore(self.store_path, self.lance_uri, self.parquet_uri, self.storage_options)


@with_parse_settings  # a field per parse setting (parsers.records.SETTINGS): max_chunk_chars, parse_workers, ...
class IngestResource(dg.ConfigurableResource):
    """Which documents make a corpus version, and how they are parsed: source_dir, and the parse settings as
    ParseConfig declares them (docs/ingest.md, "What one document may cost" and "Source fields")."""

    # A folder, an object-store URL (s3://bucket/prefix, read with the store's storage options) or git:PATH@REF
    # (parsers.sources); the sample corpus by default, wherever the package is installed.
    source_dir: str = str(SAMPLE_CORPUS / "v1")

    @model_validator(mode="after")
    def _valid_parse_config(self) -> IngestResource:
        self.parse_config()  # a bad template, level or default fails when the settings load, not at the run
        return self

    def parse_config(self) -> ParseConfig:
        return parse_config_of(self)


class AnswersResource(dg.ConfigurableResource):
    """The answers registered before each citation check."""

    answers_path: str | None = None  # JSONL/Parquet of answers; None: register nothing
    # Each line of answers_path is an LLM API's response in its envelope, of a format registered in
    # citekeeper.answers.formats.RESPONSE_FORMATS; None: answer records.
    answers_format: str | None = None
    # The groups the answers were given to (as `answers add --audience`): a record without an audience gets them,
    # one with its own keeps the groups in both; None: as the records say.
    audience: list[str] | None = None
    # A registered answer over a limit is refused as its line.
    max_claims_per_answer: int = MAX_CLAIMS_PER_ANSWER
    max_citations_per_claim: int = MAX_CITATIONS_PER_CLAIM
    max_citations_per_answer: int = MAX_CITATIONS_PER_ANSWER

    @field_validator("answers_format")
    @classmethod
    def _known_format(cls, value: str | None) -> str | None:
        converter(value)  # UnknownFormat (a ValueError) names the formats
        return value

    def limits(self) -> AnswerLimits:
        return AnswerLimits(self.max_claims_per_answer, self.max_citations_per_claim, self.max_citations_per_answer)


class VerifierResource(dg.ConfigurableResource):
    """The models (the checker claims are verified with, the embedding model re-anchoring searches with), the
    corpus language that picks their defaults, and where the checker runs."""

    # hub id or local dir; "auto": the default model of `language`; None runs the model-free tiers only
    nli_model: str | None = None
    nli_backend: str = DEFAULT_BACKEND
    # The model's protocol (verifiers.checkers.PROTOCOLS); None: the preset's, else what its config implies.
    nli_checker: str | None = None
    nli_supported_label: int | None = None  # binary: the output index that means supported (None: 1, MiniCheck's)
    nli_checker_version: str | None = None  # callable, http: the checker's version, in the verdict cache's key
    nli_device: str = DEFAULT_DEVICE  # auto | cpu | cuda | cuda:N (verifiers.devices); auto takes a GPU torch sees
    nli_threads: int | None = None  # torch intra-op threads; None: torch's default, one per core
    # auto (detected from each version's chunk texts) | en | zh | multi; picks the model when nli_model="auto"
    language: str = DEFAULT_LANGUAGE
    # hub id or local dir of the sentence-embedding model re-anchoring searches with; None: the language's default
    embedding_model: str | None = None
    # How conflicting evidence is ranked (verifiers.conflicts.RankingSettings; docs/verification.md, "Conflicts"):
    # S = w_a*authority + w_t*time + w_s*scope + w_v*support - w_x*penalty; a lead of conflict_margin decides.
    rank_weights: dict[str, float] = {}  # authority | time | scope | support | penalty -> weight; unnamed: defaults
    conflict_margin: float = RankingSettings.margin
    half_life_days: float = RankingSettings.half_life_days

    @field_validator("nli_checker")
    @classmethod
    def _known_checker(cls, value: str | None) -> str | None:
        if value is not None and value not in PROTOCOLS:
            raise ValueError(f"unknown checker protocol {value!r}: use one of {', '.join(PROTOCOLS)}")
        return value

    @field_validator("language")
    @classmethod
    def _known_language(cls, value: str) -> str:
        return validate_language(value)  # a LanguageError names the choices

    @model_validator(mode="after")
    def _valid_ranking(self) -> VerifierResource:
        self.verify_settings()  # an unknown term or a bad margin fails when the settings load, not at the run
        return self

    def search_index(self, store_root: Path | str) -> EmbeddingStore:
        """The index re-anchoring searches in the store at `store_root`, with this embedding model and language."""
        from citekeeper.search_index import EmbeddingStore  # sentence-transformers: only where a run searches

        return EmbeddingStore(store_root, model=self.embedding_model, language=self.language)

    def verify_settings(self, authority_levels: tuple[str, ...] = DEFAULT_AUTHORITY_LEVELS) -> VerifySettings:
        """The engine's settings; `authority_levels`: the vocabulary the documents were ingested with."""
        return VerifySettings(
            ranking=ranking_settings(self.rank_weights, self.conflict_margin, self.half_life_days, authority_levels)
        )


EXECUTORS = ("multiprocess", "k8s")


@dataclass(frozen=True)
class CitekeeperSettings:
    """Everything a Definitions is built from: the resources by concern, and what fixes the graph's shape."""

    store: StoreResource = field(default_factory=StoreResource)
    ingest: IngestResource = field(default_factory=IngestResource)
    answers: AnswersResource = field(default_factory=AnswersResource)
    verifier: VerifierResource = field(default_factory=VerifierResource)
    # Static shard counts: a shard's files (answers) are fixed by a hash mod n, so n must not change between
    # a run's steps; it sets the doc_shard partitions and the sharded jobs' steps.
    ingest_shards: int = 4
    verify_shards: int = 2
    executor: str = "multiprocess"  # multiprocess | k8s (each step in its own pod: deploy/k8s/)

    def __post_init__(self) -> None:
        for name in ("ingest_shards", "verify_shards"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be 1 or more, not {getattr(self, name)}")
        if self.executor not in EXECUTORS:
            raise ValueError(f"unknown executor {self.executor!r}: use one of {', '.join(EXECUTORS)}")

    def resources(self) -> dict[str, dg.ConfigurableResource]:
        return {"store": self.store, "ingest": self.ingest, "answers": self.answers, "verifier": self.verifier}
