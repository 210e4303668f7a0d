"""Every CITEKEEPER_* environment variable: its name, its type and what it sets, read once into `Settings`.

This is the one module that reads the environment (tests/test_settings.py checks every product package). The CLI
reads the settings once per command (pipelines/cli_common.py), the code location once when it loads
(pipelines/definitions.py); everything below them takes the values as arguments. A variable that is unset or
empty is None here: the owner of the setting keeps its default (the field says which), so each default is written
once, where the setting is used.

The Hugging Face variables (HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE, HF_ENDPOINT) are not citekeeper's: huggingface_hub
and transformers read them themselves, in the same process. citekeeper reads them here too, but at each call
(hub_offline, hub_endpoint), so that it decides what the libraries decide at that moment; a copy taken when the
settings were read, or passed down as a resource field, could disagree with them.

Writing a variable for a library or a child process is not reading configuration, and stays where it is needed:
parsers/document.py quiets unstructured's notices before importing it, and a parse worker points the programs it
starts at its own temp dir (parsers/parse_pool.py). The check allows exactly those statement forms,
`os.environ[NAME] = value` and `os.environ.setdefault(NAME, value)`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from citekeeper.language import validate_language

DEFAULT_STORE = ".citekeeper/store"  # the store when neither --store nor $CITEKEEPER_STORE names one
# The bundled sample corpus, package data of `pipelines` (a real directory in the installed wheel): what the demo
# ingests, and the ingest resource's source when $CITEKEEPER_SOURCE is unset.
SAMPLE_CORPUS = Path(str(files("pipelines") / "sample_corpus"))
DEFAULT_HUB_ENDPOINT = "https://huggingface.co"
_TRUE = {"1", "true", "yes", "on"}


class SettingsError(ValueError):
    """A variable that does not parse; the message names it."""


def _whole_number(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(f"must be a whole number, got {value!r}") from None


def _names(value: Any) -> Any:
    """`a, b,` as ("a", "b")."""
    return tuple(name.strip() for name in value.split(",") if name.strip()) if isinstance(value, str) else value


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"must be JSON: {exc}") from None


def _storage_options(options: Any) -> dict[str, str] | None:
    if options is None:
        return None
    if not isinstance(options, dict):
        raise ValueError(f"must be a JSON object of option -> value, got {options!r}")
    # LanceDB takes strings only; JSON true -> "true", as its boolean options expect
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in options.items()}


def _language(value: str | None) -> str | None:
    return None if value is None else validate_language(value)  # a LanguageError names the choices


Text = str | None
Number = Annotated[int | None, BeforeValidator(_whole_number)]
Names = Annotated[tuple[str, ...] | None, BeforeValidator(_names)]


def _variable(name: str, help: str) -> Any:
    return Field(None, alias=name, description=help)


class Settings(BaseModel):
    """What the CITEKEEPER_* variables say, by field; None where a variable is unset (its owner's default holds)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")

    # The corpus store (CorpusStore; StoreResource)
    store: Text = _variable("CITEKEEPER_STORE", f"The store directory; unset: --store, else {DEFAULT_STORE}.")
    lance_uri: Text = _variable("CITEKEEPER_LANCE_URI", "Where the LanceDB tables live (s3://...); unset: the root.")
    parquet_uri: Text = _variable("CITEKEEPER_PARQUET_URI", "Where the Parquet exports live; unset: the root.")
    storage_options: Annotated[dict[str, str] | None, BeforeValidator(_storage_options), BeforeValidator(_json)] = (
        _variable("CITEKEEPER_STORAGE_OPTIONS", "LanceDB storage options, a JSON object (citekeeper.locations).")
    )
    gc_keep_last: Number = _variable("CITEKEEPER_GC_KEEP_LAST", "Versions the gc schedule keeps; unset: it skips.")
    gc_keep: Names = _variable("CITEKEEPER_GC_KEEP", "Versions gc always keeps, comma-separated.")
    # Ingest (IngestResource; ParseConfig's source settings)
    source: Text = _variable("CITEKEEPER_SOURCE", "The source tree; unset: the sample corpus's v1.")
    source_url_template: Text = _variable("CITEKEEPER_SOURCE_URL_TEMPLATE", "'https://site/{path_without_ext}/'.")
    authority_levels: Names = _variable(
        "CITEKEEPER_AUTHORITY_LEVELS", "The authority vocabulary, comma-separated, most authoritative first."
    )
    source_fields_map: Annotated[dict[str, list[str]] | None, BeforeValidator(_json)] = _variable(
        "CITEKEEPER_SOURCE_FIELDS_MAP", 'Front matter keys per source field, JSON: {"updated_at": ["modified"]}.'
    )
    source_defaults: Annotated[list[list[str]] | None, BeforeValidator(_json)] = _variable(
        "CITEKEEPER_SOURCE_DEFAULTS", 'Source fields by glob, JSON: [["api/**", "authority", "official_spec"]].'
    )
    # Answers (AnswersResource)
    answers: Text = _variable("CITEKEEPER_ANSWERS", "Answers registered before each citation check.")
    answers_format: Text = _variable("CITEKEEPER_ANSWERS_FORMAT", "The --from of those answers.")
    # Models and language (VerifierResource; the CLI's --language)
    nli_model: Text = _variable("CITEKEEPER_NLI_MODEL", "The checker, hub id or directory; auto: the language's.")
    nli_backend: Text = _variable("CITEKEEPER_NLI_BACKEND", "torch | onnx.")
    nli_checker: Text = _variable("CITEKEEPER_NLI_CHECKER", "The checker's protocol: nli | binary | seq2seq | ...")
    nli_checker_version: Text = _variable(
        "CITEKEEPER_NLI_CHECKER_VERSION", "callable | http: the checker's version, in the verdict cache's key."
    )
    nli_supported_label: Number = _variable("CITEKEEPER_NLI_SUPPORTED_LABEL", "binary: the index meaning supported.")
    nli_device: Text = _variable("CITEKEEPER_NLI_DEVICE", "auto | cpu | cuda | cuda:N.")
    nli_threads: Number = _variable("CITEKEEPER_NLI_THREADS", "torch intra-op threads.")
    language: Annotated[Text, AfterValidator(_language)] = _variable(
        "CITEKEEPER_LANGUAGE", "auto | en | zh | multi: picks the default models; unset: --language, else auto."
    )
    embedding_model: Text = _variable(
        "CITEKEEPER_EMBEDDING_MODEL", "The sentence-embedding model re-anchoring searches with; unset: the language's."
    )
    # The graph's shape (CitekeeperSettings)
    ingest_shards: Number = _variable("CITEKEEPER_INGEST_SHARDS", "Static document shards of the sharded ingest.")
    verify_shards: Number = _variable("CITEKEEPER_VERIFY_SHARDS", "Static answer shards of the sharded verify.")
    executor: Text = _variable("CITEKEEPER_EXECUTOR", "multiprocess | k8s.")

    def store_locations(self) -> dict:
        """CorpusStore's keyword arguments besides the root: lance_uri, parquet_uri, storage_options."""
        return {
            "lance_uri": self.lance_uri,
            "parquet_uri": self.parquet_uri,
            "storage_options": self.storage_options or {},
        }


def variable(field: str) -> str:
    """The environment variable of a Settings field."""
    return Settings.model_fields[field].alias or field


def read_settings(env: Mapping[str, str] | None = None) -> Settings:
    """The settings in `env` (default: this process's environment); SettingsError names each bad variable."""
    env = os.environ if env is None else env
    given = {name: value for name in _VARIABLES if (value := env.get(name, "")).strip()}
    try:
        return Settings.model_validate(given)
    except ValidationError as exc:
        raise SettingsError("; ".join(_described(error) for error in exc.errors())) from None


def _described(error) -> str:
    name, *where = error["loc"]
    message = error["msg"].removeprefix("Value error, ")
    return f"{name}: {message}" + (f" (at {'.'.join(map(str, where))})" if where else "")


_VARIABLES = tuple(variable(field) for field in Settings.model_fields)


def hub_offline() -> bool:
    """$HF_HUB_OFFLINE or $TRANSFORMERS_OFFLINE, read now (see the module's docstring)."""
    return any(os.environ.get(name, "").strip().lower() in _TRUE for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_endpoint() -> str:
    """$HF_ENDPOINT, read now, else the public hub; without a trailing slash."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_HUB_ENDPOINT).rstrip("/")
