"""NLI verification assets."""
