"""Content-derived identity: chunk_id (stable under edits elsewhere in its document), text_hash, content_hash."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from citekeeper.text import normalize_text

CHUNK_ID_HEX_CHARS = 20  # 80 bits: collisions are negligible for any corpus this tool will see


def sha256_hex(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def text_hash(text: str) -> str:
    """Hash of the exact chunk text (UTF-8)."""
    return sha256_hex(text.encode("utf-8", "surrogatepass"))


def chunk_id(doc_id: str, text: str, occurrence: int) -> str:
    """Depends only on the doc_id, the chunk's normalised text (citekeeper.text.normalize_text) and how many
    chunks with that normalised text came before it in the document, so it survives edits elsewhere and moves
    within the document."""
    return _chunk_id(doc_id, normalize_text(text), occurrence)


def _chunk_id(doc_id: str, normalised_text: str, occurrence: int) -> str:
    key = f"{doc_id}\x1f{normalised_text}\x1f{occurrence}".encode("utf-8", "surrogatepass")
    return "ck_" + hashlib.sha256(key).hexdigest()[:CHUNK_ID_HEX_CHARS]


def chunk_ids(doc_id: str, texts: Iterable[str]) -> list[str]:
    """IDs for a document's chunks in order; repeated (normalised) text gets occurrence 0, 1, 2..."""
    seen: dict[str, int] = {}
    ids = []
    for text in texts:
        norm = normalize_text(text)
        occurrence = seen.get(norm, 0)
        seen[norm] = occurrence + 1
        ids.append(_chunk_id(doc_id, norm, occurrence))
    return ids
