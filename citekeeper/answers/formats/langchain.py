"""`--from langchain`: a LangChain citation tutorial's answer, or a message with citation annotations."""

from __future__ import annotations

from citekeeper.answers.formats.reader import Cited, get_field, joined, non_negative, non_negative_or_none, text_blocks


def read(response) -> tuple[str, list[Cited]]:
    """The citation tutorial's QuotedAnswer / CitedAnswer (`answer`, `citations` by source_id), or a message whose
    content blocks carry standard `citation` annotations."""
    if isinstance(response, dict) and "answer" in response:
        text = get_field(response, "answer", "response.answer", str)
        cited = []
        for i, citation in enumerate(get_field(response, "citations", "response.citations", list)):
            field = f"response.citations.{i}"
            if isinstance(citation, dict):  # QuotedAnswer's Citation
                source_id = non_negative(
                    get_field(citation, "source_id", f"{field}.source_id", int), f"{field}.source_id"
                )
                cited.append(Cited(None, (source_id,), field, get_field(citation, "quote", f"{field}.quote", str)))
            else:  # CitedAnswer: source ids
                cited.append(Cited(None, (non_negative_or_none(citation, field),), field))
        return text, cited
    blocks_field = (
        "response.content_blocks" if isinstance(response, dict) and "content_blocks" in response else "response.content"
    )
    raw = (
        response
        if isinstance(response, list)
        else get_field(response, blocks_field.split(".")[1], blocks_field, (list, str))
    )
    if isinstance(raw, str):
        return raw, []
    blocks = text_blocks(raw)
    cited = []
    for i, block, start, end in blocks:
        for j, note in enumerate(block.get("annotations") or []):
            field = f"{blocks_field}.{i}.annotations.{j}"
            if not isinstance(note, dict) or note.get("type") != "citation":
                continue  # non_standard_annotation and the like cite nothing
            extras = note.get("extras") or {}
            keys = (
                note.get("url"),
                note.get("id"),
                note.get("title"),
                extras.get("source"),
                extras.get("document_index"),
            )
            lo, hi = note.get("start_index"), note.get("end_index")
            span = (
                (start + non_negative(lo, f"{field}.start_index"), start + non_negative(hi, f"{field}.end_index"))
                if lo is not None and hi is not None
                else (start, end)
            )
            cited.append(Cited(span, keys, field, note.get("cited_text")))
    return joined(blocks), cited
