"""Corpus changes and the citations resting on them: diff, status, re-anchoring, repair, history, evidence."""
