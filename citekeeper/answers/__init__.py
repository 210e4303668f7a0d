"""Answers and their citations: records and their validation (records), the answer files they come in (files),
the LLM API and framework envelopes they are converted from (formats), anchoring citations by document into
chunks (anchoring), the answer store (store) and its export (export)."""
