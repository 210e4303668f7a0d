"""citekeeper ingest | versions | export."""
COMMANDS: list = []
