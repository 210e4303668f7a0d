"""`--from anthropic`: a response of Anthropic's Messages API."""

from __future__ import annotations

from citekeeper.answers.formats.reader import Cited, ShapeError, get_field, joined, non_negative_or_none, text_blocks


def read(response) -> tuple[str, list[Cited]]:
    """Messages API: text blocks, each with the `citations` that support it."""
    blocks = text_blocks(get_field(response, "content", "response.content", list))
    cited = []
    for i, block, start, end in blocks:
        for j, citation in enumerate(block.get("citations") or []):
            field = f"response.content.{i}.citations.{j}"
            kind = get_field(citation, "type", f"{field}.type", str)
            keys: tuple[object, ...]
            if kind in ("char_location", "page_location", "content_block_location"):
                keys = (
                    non_negative_or_none(citation.get("document_index"), f"{field}.document_index"),
                    citation.get("document_title"),
                )
            elif kind == "search_result_location":
                keys = (
                    citation.get("source"),
                    citation.get("title"),
                    non_negative_or_none(citation.get("search_result_index"), f"{field}.search_result_index"),
                )
            elif kind == "web_search_result_location":
                keys = (citation.get("url"), citation.get("title"))
            else:
                raise ShapeError(f"{field}.type", f"unknown Anthropic citation type {kind!r:.40}")
            char = kind == "char_location"
            cited.append(
                Cited(
                    (start, end),
                    keys,
                    field,
                    citation.get("cited_text"),
                    citation.get("start_char_index") if char else None,
                    citation.get("end_char_index") if char else None,
                )
            )
    return joined(blocks), cited
