"""Imported by the parse pool's forkserver (parsers.parse_pool.PRELOAD) for its side effect: one small markdown
parse loads what unstructured otherwise loads on a process's first document (spaCy's pipeline), so every worker
forked from the server starts warm. Forking is safe only from a process running no other thread: parsers.document
opts out of unstructured's usage-analytics thread, so this parse starts none. What it loaded is then frozen out of
the garbage collector: the server's last collection at exit walked all of it while it held the CLI's stdout open
(0.5 s of a 5,000-document reindex)."""

import gc
from pathlib import Path

from citekeeper.identity import sha256_hex
from parsers.document import parse_document
from parsers.records import ParseConfig, SourceFile

_TEXT = b"# Warm-up\n\nThis paragraph has two sentences. It is parsed once, in the forkserver.\n"

parse_document(
    SourceFile(
        path=Path("warm-up.md"),
        source_path="warm-up.md",
        doc_id="warm-up.md",
        filetype="md",
        content_hash=sha256_hex(_TEXT),
        size_bytes=len(_TEXT),
        access_scope="user_visible",
        raw=_TEXT,
    ),
    ParseConfig(),
)
gc.freeze()
