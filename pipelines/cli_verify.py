"""citekeeper verify."""
COMMANDS: list = []
