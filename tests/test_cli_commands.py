"""The CLI's commands, listed without importing their modules (pipelines.cli.COMMAND_MODULES): the table names
every command of every module, each where it lives, and a command's run imports only its own module."""

import importlib
import subprocess
import sys

import click

from pipelines.cli import COMMAND_MODULES, main


def test_the_table_names_each_command_of_every_module_where_it_lives():
    modules = {module: importlib.import_module(f"pipelines.{module}") for module in COMMAND_MODULES.values()}
    defined = {command.name: name for name, module in modules.items() for command in module.COMMANDS}
    assert defined == COMMAND_MODULES
    with click.Context(main) as ctx:
        assert all(main.get_command(ctx, name).name == name for name in main.list_commands(ctx))
        assert main.get_command(ctx, "no-such-command") is None


def test_a_command_imports_only_its_own_module():
    script = (
        "import sys\n"
        "from pipelines.cli import main\n"
        "main.main(args=['versions', '--help'], prog_name='citekeeper', standalone_mode=False)\n"
        "print(sorted(m for m in sys.modules if m.startswith('pipelines.cli_')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "['pipelines.cli_common', 'pipelines.cli_ingest']", done.stdout
