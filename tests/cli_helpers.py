"""The CLI's commands as the tests walk them."""

from __future__ import annotations

import click


def leaf_commands(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    """'answers add' -> its click command, for every command that runs (not a group). Through the group's listing:
    the CLI's commands load when asked for (pipelines.cli.COMMAND_MODULES)."""
    with click.Context(group) as ctx:
        named = {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}
    commands: dict[str, click.Command] = {}
    for name, command in named.items():
        if isinstance(command, click.Group):
            commands.update(leaf_commands(command, f"{prefix}{name} "))
        elif command is not None:
            commands[prefix + name] = command
    return commands
