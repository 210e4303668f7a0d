"""E-mail formats: .eml (the standard library's email package) and .msg (Outlook, python-oxmsg). The body and each
attachment are separate parts (Locator.part), and each attachment is partitioned and quarantined by its own
file format (_message)."""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass, replace
from email.header import decode_header
from email.message import EmailMessage, Message, MIMEPart
from pathlib import PurePath
from typing import cast

from parsers.formats.base import OLE2_SIGNATURE, Format, Partitioned
from parsers.formats.text import UndecodableText, decode_text
from parsers.records import DocumentError, EmailHeader, Locator, ParseConfig, SourceFile

BODY_PART = "body"
_FOLD = re.compile(r"\r?\n(?=[ \t])")  # a header's line break before white space is folding, not content


@dataclass(frozen=True)
class _Attachment:
    name: str | None
    data: bytes | None  # None: attached by reference, or not a plain file
    mime_type: str
    content_id: str | None


def _partition_eml(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    message = email.message_from_bytes(raw, policy=email.policy.default)
    body = message.get_body(preferencelist=("html", "plain"))
    body_elements, encoding = _eml_body(source, body) if body is not None else ([], None)
    attachments = [_eml_attachment(part) for part in message.iter_attachments()]
    return _message(source, config, body_elements, attachments, _eml_header(source, message), encoding)


def _eml_header(source: SourceFile, message: EmailMessage) -> EmailHeader:
    date = message["Date"]
    sent_at = date.datetime if date is not None else None  # None too when the header cannot be parsed
    return EmailHeader(
        subject=_header_text(source, _raw_header(message, "Subject")),
        sender=_header_text(source, _raw_header(message, "From")),
        sent_at=sent_at.isoformat() if sent_at else None,  # the sender's own UTC offset, as the header gives it
    )


def _raw_header(message: EmailMessage, name: str) -> str | None:
    return next((value for key, value in message.raw_items() if key.lower() == name.lower()), None)


def _header_text(source: SourceFile, value: str | None) -> str | None:
    """A header's text, each RFC 2047 word decoded by decode_text with its charset as the declared one: the
    standard library decodes them with errors="replace", and GB2312-labelled names often hold GBK characters."""
    if value is None:
        return None
    words = []
    for word, charset in decode_header(_FOLD.sub("", value)):
        if isinstance(word, str):  # no encoded words: raw 8-bit bytes (RFC 6532) are in it as surrogate escapes
            word = word.encode("utf-8", "surrogateescape")
        try:
            words.append(decode_text(word, declared=charset)[0])
        except UndecodableText as exc:
            raise DocumentError(
                source.source_path, "read", f"message header: {exc}", error_type="EncodingError"
            ) from exc
    return "".join(words).strip() or None


def _eml_body(source: SourceFile, part: MIMEPart) -> tuple[list, str]:
    """The body's elements and encoding: its bytes through decode_text with the MIME charset as the declared one
    (partition_email decodes with errors="replace", so a body labelled GB2312 but GBK would quote U+FFFD)."""
    # quoted-printable or base64 undone, the charset not yet (a body part is no multipart: bytes, or None)
    raw = cast(bytes | None, part.get_payload(decode=True)) or b""
    try:
        text, encoding = decode_text(raw, declared=part.get_content_charset())
    except UndecodableText as exc:
        raise DocumentError(source.source_path, "read", f"message body: {exc}", error_type="EncodingError") from exc
    html, plain = (text, None) if part.get_content_type() == "text/html" else (None, text)
    return _body_elements(html, plain), encoding


def _eml_attachment(part: EmailMessage) -> _Attachment:
    data: bytes | None
    if part.get_content_type() == "message/rfc822":  # a forwarded message: its own bytes, as an .eml file has them
        data = cast(Message, part.get_payload(0)).as_bytes()
    else:  # a single part's payload decodes to bytes
        data = None if part.is_multipart() else cast(bytes, part.get_payload(decode=True))
    return _Attachment(part.get_filename(), data, part.get_content_type(), part["Content-ID"])


def _partition_msg(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    message = _load_msg(source, raw)
    header = EmailHeader(
        subject=message.subject or None,  # a Unicode property, not a header
        sender=_header_text(source, message.sender),  # the transport header's From, when there is one
        sent_at=message.sent_date.isoformat() if message.sent_date else None,
    )
    body_elements = _body_elements(html=message.html_body, plain=message.body)  # oxmsg decodes the body
    attachments = [_msg_attachment(attachment) for attachment in message.attachments]
    return _message(source, config, body_elements, attachments, header, encoding=None)


def _load_msg(source: SourceFile, raw: bytes):
    from oxmsg import Message

    if not raw.startswith(OLE2_SIGNATURE):  # every .msg is an OLE2 compound file
        raise DocumentError(
            source.source_path,
            "parse",
            "not an Outlook .msg file: no OLE2 compound-file header",
            error_type="CorruptMsg",
        )
    try:
        return Message.load(raw)
    except Exception as exc:  # olefile and oxmsg raise anything on a damaged container
        raise DocumentError(
            source.source_path,
            "parse",
            f"not a readable Outlook .msg file: {type(exc).__name__}: {exc}",
            error_type="CorruptMsg",
        ) from exc


def _msg_attachment(attachment) -> _Attachment:
    from oxmsg.domain.constants import PID_ATTACH_CONTENT_ID

    data = attachment.file_bytes if attachment.attached_by_value else None
    content_id = attachment.properties.str_prop_value(PID_ATTACH_CONTENT_ID)
    return _Attachment(attachment.file_name, data, attachment.mime_type, content_id)


def _body_elements(html: str | None, plain: str | None) -> list:
    if html:
        from unstructured.partition.html import partition_html

        return partition_html(text=html)
    if plain:
        from unstructured.partition.text import partition_text

        return partition_text(text=plain)
    return []


def _message(
    source: SourceFile,
    config: ParseConfig,
    body_elements: list,
    attachments: list[_Attachment],
    header: EmailHeader,
    encoding: str | None,
) -> Partitioned:
    """The body's elements (Locator.part "body"), then each attachment's (part: its file name, "fwd.eml/report.pdf"
    for one inside a forwarded message), so no chunk spans the body and an attachment. unstructured's
    partition_email / partition_msg are not used: they hand attachments to its auto partition (a PDF or image may
    then want layout models from the network) and skip what fails, silently. Here each attachment is partitioned
    by citekeeper's own format for its extension; one that fails quarantines the message, naming it."""
    elements = list(body_elements)
    locators = {id(element): Locator(part=BODY_PART) for element in elements}
    for attachment in attachments:
        if not attachment.name or attachment.data is None:  # nothing to cite it by, or no data
            continue
        file_format = _attachment_format(attachment.name, attachment)
        if file_format is None:
            continue
        partitioned = _partition_attachment(source, config, file_format, attachment.name, attachment.data)
        for element in partitioned.elements:
            inner = partitioned.locate(element)
            locators[id(element)] = replace(inner, part=_part_name(attachment.name, inner.part))
            elements.append(element)
    # Keyed by id: the elements are the very objects canonical_text hands to `locate`, alive in `elements`.
    return Partitioned(elements, lambda element: locators[id(element)], encoding=encoding, email=header)


def _attachment_format(name: str, attachment: _Attachment) -> Format | None:
    """The format to partition attachment `name` with; None (skipped) for one of a type citekeeper does not
    ingest, or an image the HTML body shows inline (a Content-ID: the message's look, such as a logo, not a
    document)."""
    from parsers.formats import BY_EXTENSION  # the registry imports this module, so not at import time

    if attachment.content_id and attachment.mime_type.startswith("image/"):
        return None
    return BY_EXTENSION.get(PurePath(name).suffix.lower())


def _partition_attachment(
    source: SourceFile, config: ParseConfig, file_format: Format, name: str, data: bytes
) -> Partitioned:
    # The attachment stands in for a file of its own; source_path stays the message's, which errors name.
    inner = replace(source, filetype=file_format.filetype, raw=data, size_bytes=len(data))
    try:
        return file_format.partition(inner, data, config)
    except DocumentError as exc:
        error = exc.error
        raise DocumentError(
            source.source_path,
            error.stage,
            f"attachment {name!r}: {error.reason}",
            error_type=error.error_type,
        ) from exc
    except Exception as exc:  # as parse_document reports any parser's crash, but naming the attachment
        reason = f"attachment {name!r}: {file_format.filetype} parser failed: {type(exc).__name__}: {exc}"
        raise DocumentError(source.source_path, "parse", reason, error_type="ParserError") from exc


def _part_name(attachment_name: str, inner_part: str | None) -> str:
    """The attachment's name; an attachment of a forwarded message is named inside it ("fwd.eml/report.pdf")."""
    return attachment_name if inner_part in (None, BODY_PART) else f"{attachment_name}/{inner_part}"


FORMATS = (
    Format(
        "eml",
        (".eml",),
        _partition_eml,
        "e-mail message (MIME); attachments partitioned by their own format",
        isolated=True,
    ),
    Format(
        "msg", (".msg",), _partition_msg, "Outlook message; attachments partitioned by their own format", isolated=True
    ),
)
