"""citekeeper demo."""
COMMANDS: list = []
