"""citekeeper models pull."""

from __future__ import annotations

from pathlib import Path

import click
from click.core import ParameterSource

from citekeeper.model_sources import PulledModel
from citekeeper.outputs import DIRECTORY
from pipelines.cli_common import OutputCommand, OutputPath, language_option


@click.group("models")
def models_group() -> None:
    """Models for machines without network."""


@models_group.command("pull", cls=OutputCommand)
@click.argument("models", nargs=-1)
@click.option(
    "--to",
    "to_dir",
    required=True,
    type=OutputPath(DIRECTORY),
    help="Directory to save the models in, one subdirectory each; copy it to the machine without network.",
)
@language_option(
    "Without MODEL arguments: pull the default NLI and embedding models of this corpus language "
    "(auto: of every language, as detection may pick any)."
)
def pull_command(models: tuple[str, ...], to_dir: Path, language: str) -> None:
    """Save MODELs (hub ids or local directories; default: the --language defaults) under --to DIR, each a plain
    directory that loads with no network. A hub id is downloaded into the Hugging Face cache unless already there."""
    from citekeeper.language import models_for
    from citekeeper.model_sources import ModelSourceError, default_models, languages_of, pull

    if models and click.get_current_context().get_parameter_source("language") is ParameterSource.COMMANDLINE:
        raise click.UsageError("give MODEL arguments or --language, not both")
    if not models and any(models_for(lang).embedding is None for lang in languages_of(language)):
        click.echo("the English embedding model (all-MiniLM-L6-v2) ships with citekeeper: nothing to pull for it")
    try:
        pulled = pull(models or list(default_models(language)), to_dir)
    except ModelSourceError as exc:
        raise click.ClickException(str(exc)) from exc
    roles = default_models("auto")
    for model in pulled:
        click.echo(_describe(model, roles.get(model.spec)))


def _describe(model: PulledModel, role: str | None) -> str:
    """Where `model` went and how to load it on the machine it is copied to."""
    from verifiers.checkers.presets import preset_for

    nli, embedding = f"--model {model.path}", f"CITEKEEPER_EMBEDDING_MODEL={model.path}"
    preset = preset_for(model.spec)
    use = {"nli": nli, "embedding": embedding}.get(
        "nli" if preset else role or "", f"{nli} (NLI) or {embedding} (embeddings)"
    )
    commit = f" @ {model.commit}" if model.commit else ""
    known = f"\n  checker: {_preset_line(preset)}" if preset else ""
    return f"{model.spec}{commit} -> {model.path}\n  use: {use}{known}"


def _preset_line(preset) -> str:
    bacc = f"LLM-AggreFact {preset.aggrefact_bacc}" if preset.aggrefact_bacc else "not on LLM-AggreFact"
    chunk = f", chunks of {preset.chunk}" if preset.chunk else ""
    terms = "" if preset.commercial else " (not for commercial use)"
    return f"{preset.protocol}, window {preset.window} tokens{chunk}, {bacc}, licence {preset.licence}{terms}"


@models_group.command("list")
def list_command() -> None:
    """The checkers citekeeper knows by hub id: protocol, window, LLM-AggreFact accuracy, licence."""
    from verifiers.checkers.presets import PRESETS

    for hub_id, preset in PRESETS.items():
        click.echo(f"{hub_id}\n  {_preset_line(preset)}")


COMMANDS = [models_group]
