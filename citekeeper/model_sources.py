"""Where a model comes from: a local directory, the local Hugging Face cache, or a download into it (resolve_model);
`pull` copies models into plain directories for a machine without network (docs/verification.md, "Where
models come from"); and how a model folder is loaded, as data and never as code (load_pretrained,
load_weights, load_sentence_transformer; docs/production.md, "Security model")."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from citekeeper.language import LANGUAGES, models_for
from citekeeper.settings import hub_endpoint, hub_offline

# How long the hub may take to answer the first request. Without a bound, a machine whose network drops
# packets waits minutes (TCP connect retries, DNS timeouts, huggingface_hub's own retries) before failing.
HUB_TIMEOUT_S = 5.0
WEIGHT_SUFFIXES = (".safetensors", ".bin")
SUPPORT_SUFFIXES = (".json", ".txt", ".model")  # config.json, tokenizer.json, vocab.txt, spm.model, ...
TOKENIZER_FILES = frozenset(
    {"tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "spm.model", "sentencepiece.bpe.model"}
)
# The files in which transformers reads `auto_map`: the classes it would import from Python files of the folder.
CUSTOM_CODE_FILES = ("config.json", "tokenizer_config.json")


class ModelSourceError(RuntimeError):
    """A model spec that gives no loadable local directory; the message says why."""


class UntrustedModelError(ModelSourceError):
    """A model folder that would run code of its own when loaded; refused before anything is loaded."""


@dataclass(frozen=True)
class LocalModel:
    path: Path  # a directory from_pretrained loads
    commit: str | None  # the hub commit of a hub id; None for a spec that is a directory


@dataclass(frozen=True)
class PulledModel:
    spec: str
    path: Path  # <to_dir>/<pulled_name(spec)>, a plain save_pretrained-style directory
    commit: str | None


def resolve_model(spec: str | Path) -> LocalModel:
    """The local directory of `spec` (directory or hub id), downloading a hub id that is not cached.
    $HF_HUB_OFFLINE and $HF_ENDPOINT are read at each call; a hub that does not answer within HUB_TIMEOUT_S
    fails the call at once."""
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ModelSourceError(f"{path} has no config.json")
        return LocalModel(path, None)
    if _looks_like_path(str(spec)):
        raise ModelSourceError(f"directory {path} does not exist")
    cached = _cached_snapshot(str(spec))
    if cached is not None:
        return LocalModel(cached, cached.name)
    if hub_offline():
        raise ModelSourceError("it is not in the local Hugging Face cache and HF_HUB_OFFLINE=1")
    # The endpoint is passed explicitly: huggingface_hub reads $HF_ENDPOINT once, when it is imported.
    folder = _download(str(spec), hub_endpoint())
    return LocalModel(folder, folder.name)


def _looks_like_path(spec: str) -> bool:
    """True for a spec that can only be a path: a hub id is `name` or `org/name`."""
    return spec.startswith((".", "/", "~")) or spec.count("/") > 1


def needed_files(names: Iterable[str]) -> list[str]:
    """The files from_pretrained needs out of a repo or directory listing: the top-level config and tokenizer
    files and one weights format, safetensors when there are any (many repos carry the weights twice)."""
    top = sorted(name for name in names if "/" not in name)
    return [name for name in top if name.endswith(SUPPORT_SUFFIXES)] + weight_files(top)


def weight_files(names: Iterable[str]) -> list[str]:
    """The weights a listing holds in the one format citekeeper loads: safetensors when there are any, else the
    pickled .bin files."""
    names = sorted(names)
    return [name for name in names if name.endswith(".safetensors")] or [
        name for name in names if name.endswith(".bin")
    ]


def refuse_custom_code(directory: Path) -> None:
    """UntrustedModelError when `directory` names Python code of its own (`auto_map`), which transformers would
    import from the folder: citekeeper loads a model folder as data only."""
    for name in CUSTOM_CODE_FILES:
        path = directory / name
        if not path.is_file():
            continue
        try:
            settings = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelSourceError(f"{path} is not readable JSON: {exc}") from exc
        if isinstance(settings, dict) and "auto_map" in settings:
            raise UntrustedModelError(
                f"{path} has the key `auto_map`, which names Python code in the model folder; citekeeper never "
                "runs code from a model folder (use a model whose architecture transformers ships)"
            )


def load_pretrained(loader, directory: Path, **options):
    """`loader.from_pretrained` (AutoConfig, AutoTokenizer, an AutoModelFor* class) on a local model folder, as
    citekeeper loads every one: its custom code refused first and never imported, whatever stdin would answer."""
    refuse_custom_code(directory)
    with _pickles_refused(directory):
        return loader.from_pretrained(directory, trust_remote_code=False, local_files_only=True, **options)


def load_weights(model_class, directory: Path):
    """load_pretrained of a model class, from the safetensors when the folder has both formats."""
    return load_pretrained(model_class, directory, **_safetensors_first(directory))


def load_sentence_transformer(directory: Path):
    """A sentence-transformers model on the CPU from a local folder, under load_pretrained's rules (sentence-
    transformers also refuses, without trust_remote_code, a modules.json type outside its own package)."""
    refuse_custom_code(directory)
    from sentence_transformers import SentenceTransformer

    with _pickles_refused(directory):
        return SentenceTransformer(
            str(directory),
            device="cpu",
            local_files_only=True,
            trust_remote_code=False,
            model_kwargs=_safetensors_first(directory),
        )


def _safetensors_first(directory: Path) -> dict:
    # transformers prefers safetensors on its own today; said explicitly so a pickle beside them is never read.
    return {"use_safetensors": True} if any(name.endswith(".safetensors") for name in os.listdir(directory)) else {}


@contextmanager
def _pickles_refused(directory: Path) -> Iterator[None]:
    """torch.load's weights_only refusal of a pickle holding more than tensors, as one UntrustedModelError
    naming the weight files, in place of a raw UnpicklingError."""
    try:
        yield
    except pickle.UnpicklingError as exc:
        files = ", ".join(str(directory / name) for name in weight_files(os.listdir(directory)))
        raise UntrustedModelError(
            f"{files}: the pickled weights hold objects besides tensors, which citekeeper never unpickles "
            "(torch.load with weights_only refused them); use a copy of the model saved as safetensors"
        ) from exc


def _is_loadable(names: Iterable[str]) -> bool:
    """A listing with a config, a tokenizer and weights."""
    names = set(names)
    return "config.json" in names and bool(names & TOKENIZER_FILES) and any(n.endswith(WEIGHT_SUFFIXES) for n in names)


def _cached_snapshot(repo_id: str) -> Path | None:
    """The cached snapshot of `repo_id`'s default branch, read without network access; None when it is missing
    or incomplete (a download that was interrupted links only the files it finished)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        config = try_to_load_from_cache(repo_id, "config.json")
    except ValueError as exc:  # not a valid hub id
        raise ModelSourceError(f"it is neither a local directory nor a Hugging Face hub id ({exc})") from exc
    if not isinstance(config, str):
        return None
    folder = Path(config).parent
    return folder if _is_loadable(os.listdir(folder)) else None


def _download(repo_id: str, endpoint: str) -> Path:
    from huggingface_hub import snapshot_download

    files = needed_files(_repo_files(repo_id, endpoint))
    if not _is_loadable(files):
        raise ModelSourceError(f"{endpoint}/{repo_id} has no config.json, tokenizer and safetensors/.bin weights")
    print(f"downloading {repo_id} from {endpoint} into the Hugging Face cache", file=sys.stderr, flush=True)
    try:
        return Path(snapshot_download(repo_id, allow_patterns=files, endpoint=endpoint, etag_timeout=HUB_TIMEOUT_S))
    except Exception as exc:  # the hub client's HTTP/connection errors differ between huggingface_hub releases
        raise ModelSourceError(f"downloading it from {endpoint} failed: {_first_line(exc)}") from exc


def _repo_files(repo_id: str, endpoint: str) -> list[str]:
    """The file names of `repo_id` on the hub; ModelSourceError when the hub does not answer in HUB_TIMEOUT_S."""
    from huggingface_hub import HfApi

    def model_info():
        return HfApi(endpoint=endpoint).model_info(repo_id, timeout=HUB_TIMEOUT_S)

    try:
        info = _answer_within(HUB_TIMEOUT_S, model_info)
    except Exception as exc:  # the hub client's HTTP/connection errors differ between huggingface_hub releases
        raise ModelSourceError(
            f"it is not in the local Hugging Face cache and cannot be fetched from {endpoint}: {_first_line(exc)}"
        ) from exc
    return [sibling.rfilename for sibling in info.siblings or []]


def _answer_within(seconds: float, call: Callable):
    """call() in a daemon thread, given up after `seconds`: socket timeouts do not bound a DNS lookup."""
    outcome = {}

    def run():
        try:
            outcome["value"] = call()
        except Exception as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _first_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: " + (str(exc).strip().splitlines() or [""])[0]


def languages_of(setting: str) -> list[str]:
    """The concrete languages a language setting can resolve to: `auto` can detect any of them."""
    return [language for language in LANGUAGES if language != "auto"] if setting == "auto" else [setting]


def default_models(setting: str) -> dict[str, str]:
    """The models a language setting can load, each with its role (`nli` or `embedding`), NLI models first.
    The bundled English embedding model is not among them: it ships with citekeeper."""
    pairs = [models_for(language) for language in languages_of(setting)]
    roles = {pair.nli: "nli" for pair in pairs}
    return roles | {pair.embedding: "embedding" for pair in pairs if pair.embedding}


PULLED_FROM = "citekeeper-pulled-from.json"  # in a pulled directory: the spec and commit it was pulled from


def pulled_spec(directory: Path | str) -> str | None:
    """The hub id (or path) a directory `pull` saved was pulled from; None for any other directory."""
    try:
        return json.loads((Path(directory) / PULLED_FROM).read_text(encoding="utf-8"))["spec"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pulled_name(spec: str) -> str:
    """The subdirectory `pull` saves `spec` in: `org--name` for a hub id, the directory's name for a path."""
    path = Path(spec).expanduser()
    name = path.resolve().name if path.is_dir() or _looks_like_path(spec) else spec.replace("/", "--")
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def pull(models: Iterable[str], to_dir: Path | str) -> list[PulledModel]:
    """Copy each model (downloaded first when it is not cached) into <to_dir>/<pulled_name>, a plain directory
    that loads with no network: pass it as --model (NLI) or $CITEKEEPER_EMBEDDING_MODEL (embeddings)."""
    to_dir = Path(to_dir)
    to_dir.mkdir(parents=True, exist_ok=True)
    return [_pull_one(str(spec), to_dir) for spec in models]


def _pull_one(spec: str, to_dir: Path) -> PulledModel:
    source = resolve_model(spec)
    refuse_custom_code(source.path)  # a copy that no citekeeper command would load
    target = to_dir / pulled_name(spec)
    # Copied beside the target and renamed into place, so an interrupted pull never leaves half a model there.
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=to_dir))
    try:
        for name in needed_files(os.listdir(source.path)):
            shutil.copyfile(source.path / name, staging / name)  # follows the cache's links to its blobs
        (staging / PULLED_FROM).write_text(json.dumps({"spec": spec, "commit": source.commit}) + "\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return PulledModel(spec, target, source.commit)
