"""citekeeper answers add | diff | stale."""
COMMANDS: list = []
