"""E-mail end to end: the header on documents and chunks, body and attachments as separate parts, encodings right.

The .eml files are built here with the standard library's email package. No .msg file can be built offline
(python-oxmsg only reads, and neither it, unstructured nor extract-msg ship a .msg in their packages), so .msg
is tested through its quarantine path and, for the mapping from a message to parts, with a stand-in for the
object oxmsg loads.
"""

from __future__ import annotations

import base64
import datetime as dt
import quopri
from email.message import EmailMessage, Message
from pathlib import Path
from types import SimpleNamespace

import oxmsg
import pytest

from citekeeper.integrity import misplaced_offsets
from citekeeper.store import CorpusStore
from parsers.discover import discover_sources
from parsers.document import parse_document
from parsers.ingest import ingest
from parsers.records import ParseConfig

CONFIG = ParseConfig()
GBK_BODY = "各位同事：\n\n本季度销售额增长了百分之十二。朱镕基的报告见附件。\n"  # 镕 is GBK, not GB2312
MINUTES = "会议纪要\n\n部署前请备份数据库。回滚步骤见第三节。\n"


def gb2312_word(text: str) -> str:
    """An RFC 2047 encoded word labelled GB2312, as mail clients write it, holding GBK bytes."""
    return f"=?gb2312?B?{base64.b64encode(text.encode('gbk')).decode()}?="


def chinese_message() -> bytes:
    message = Message()  # compat32: the headers stay exactly as written here
    message["MIME-Version"] = "1.0"
    message["Subject"] = gb2312_word("季度报告：请王喆审阅")
    message["From"] = f"{gb2312_word('王喆')} <wang.zhe@acme.cn>"
    message["To"] = "team@acme.cn"
    message["Date"] = "Tue, 05 Mar 2024 09:30:00 +0800"
    message["Content-Type"] = 'text/plain; charset="gb2312"'
    message["Content-Transfer-Encoding"] = "quoted-printable"
    message.set_payload(quopri.encodestring(GBK_BODY.encode("gbk")).decode("ascii"))
    return message.as_bytes()


def message_with_attachments() -> bytes:
    message = EmailMessage()
    message["Subject"] = "Q3 review"
    message["From"] = "Ann Lee <ann@acme.com>"
    message["Date"] = "Wed, 06 Mar 2024 17:05:00 -0500"
    message.set_content("Hi team,\n\nThe Q3 numbers are in. Revenue grew twelve percent.\n")
    message.add_alternative(
        "<html><body><p>Hi team,</p><p>The Q3 numbers are in. Revenue grew twelve percent.</p></body></html>",
        subtype="html",
    )
    message.add_attachment(MINUTES.encode("utf-8"), maintype="text", subtype="plain", filename="会议纪要.txt")
    message.add_attachment(b"PK\x03\x04 not for citekeeper", maintype="application", subtype="zip", filename="data.zip")
    return message.as_bytes()


def message_with_broken_attachment() -> bytes:
    message = EmailMessage()
    message["Subject"] = "broken"
    message["From"] = "ann@acme.com"
    message.set_content("The body is fine.\n")
    message.add_attachment(b"caf\x81 \xff", maintype="text", subtype="plain", filename="notes.txt")
    return message.as_bytes()


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> tuple[CorpusStore, str, dict]:
    root = tmp_path_factory.mktemp("formats_email")
    source = root / "src"
    source.mkdir()
    (source / "report.eml").write_bytes(chinese_message())
    (source / "review.eml").write_bytes(message_with_attachments())
    (source / "broken.eml").write_bytes(message_with_broken_attachment())
    (source / "not-outlook.msg").write_bytes(b"From: someone\n\nnot an OLE2 file")
    (source / "truncated.msg").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 100)
    store = CorpusStore(root / "store")
    result = ingest(source, store)
    return store, result.manifest.name, {e.source_path: e for e in result.errors}


def rows(ingested, table: str, doc_id: str) -> list[dict]:
    store, version, _ = ingested
    read = store.read_documents if table == "documents" else store.read_chunks
    return read(version, doc_ids=[doc_id]).to_dicts()


def test_offsets_reproduce_the_text(ingested):
    store, version, _ = ingested
    assert misplaced_offsets(store.read_chunks(version), store.read_documents(version)).height == 0


def test_gb2312_quoted_printable_message(ingested):
    (doc,) = rows(ingested, "documents", "report.eml")
    assert "本季度销售额增长了百分之十二。朱镕基的报告见附件。" in doc["text"]
    expected_header = ("季度报告：请王喆审阅", "王喆 <wang.zhe@acme.cn>", "2024-03-05T09:30:00+08:00")
    assert (doc["email_subject"], doc["email_from"], doc["email_date"]) == expected_header
    assert doc["encoding"] == "gb18030"  # GB2312 is read as its superset
    chunks = rows(ingested, "chunks", "report.eml")
    assert {(c["email_subject"], c["email_from"], c["email_date"]) for c in chunks} == {expected_header}
    assert {c["email_part"] for c in chunks} == {"body"}


def test_body_and_attachment_are_separate_parts(ingested):
    (doc,) = rows(ingested, "documents", "review.eml")
    assert (doc["email_subject"], doc["email_from"], doc["email_date"]) == (
        "Q3 review",
        "Ann Lee <ann@acme.com>",
        "2024-03-06T17:05:00-05:00",
    )
    chunks = rows(ingested, "chunks", "review.eml")
    assert {c["email_part"] for c in chunks} == {"body", "会议纪要.txt"}  # data.zip: no format for it, skipped
    attachment_start = doc["text"].index("会议纪要")
    for chunk in chunks:
        assert doc["text"][chunk["start_char"] : chunk["end_char"]] == chunk["text"]
        in_attachment = chunk["start_char"] >= attachment_start
        assert in_attachment == (chunk["email_part"] == "会议纪要.txt")
        assert chunk["end_char"] <= attachment_start or in_attachment  # no chunk spans body and attachment
    body = " ".join(c["text"] for c in chunks if c["email_part"] == "body")
    assert "Revenue grew twelve percent." in body and "<p>" not in body  # the HTML alternative, as text
    assert "部署前请备份数据库。" in " ".join(c["text"] for c in chunks if c["email_part"] == "会议纪要.txt")
    assert all(c["email_subject"] == "Q3 review" for c in chunks)


def test_an_attachment_that_fails_quarantines_the_message_naming_it(ingested):
    error = ingested[2]["broken.eml"]
    assert (error.stage, error.error_type) == ("read", "EncodingError")
    assert error.reason.startswith("attachment 'notes.txt': byte 0x81 at offset 3")


def test_corrupt_msg_is_quarantined(ingested):
    errors = ingested[2]
    assert (errors["not-outlook.msg"].stage, errors["not-outlook.msg"].error_type) == ("parse", "CorruptMsg")
    assert "no OLE2 compound-file header" in errors["not-outlook.msg"].reason
    assert errors["truncated.msg"].error_type == "CorruptMsg"
    assert set(errors) == {"broken.eml", "not-outlook.msg", "truncated.msg"}


def parse_file(path: Path):
    (source,), errors = discover_sources(path.parent, CONFIG)
    assert errors == []
    return parse_document(source, CONFIG)


def test_forwarded_message_parts_are_named_inside_it(tmp_path):
    forwarded = EmailMessage()
    forwarded["Subject"] = "original"
    forwarded["From"] = "bob@acme.com"
    forwarded.set_content("The original message body.\n")
    forwarded.add_attachment(b"Numbers for the board.\n", maintype="text", subtype="plain", filename="numbers.txt")
    outer = EmailMessage()
    outer["Subject"] = "Fwd: original"
    outer["From"] = "ann@acme.com"
    outer.set_content("See below.\n")
    outer.add_attachment(forwarded, filename="original.eml")
    (tmp_path / "fwd.eml").write_bytes(outer.as_bytes())
    doc = parse_file(tmp_path / "fwd.eml")
    parts = {chunk.email_part: chunk.text for chunk in doc.chunks}
    assert parts == {
        "body": "See below.",
        "original.eml": "The original message body.",
        "original.eml/numbers.txt": "Numbers for the board.",
    }
    assert doc.email.subject == "Fwd: original"


def test_images_shown_in_the_html_body_are_not_attachments(tmp_path):
    message = EmailMessage()
    message["Subject"] = "signature"
    message["From"] = "ann@acme.com"
    message.set_content("<html><body><p>Thanks.</p><img src='cid:logo'></body></html>", subtype="html")
    message.add_related(
        b"\x89PNG not even an image", maintype="image", subtype="png", cid="<logo>", filename="image001.png"
    )
    (tmp_path / "signed.eml").write_bytes(message.as_bytes())
    doc = parse_file(tmp_path / "signed.eml")
    assert [(chunk.email_part, chunk.text) for chunk in doc.chunks] == [("body", "Thanks.")]


@pytest.mark.parametrize("charset", ["utf-8", "gbk"])
def test_raw_8bit_headers(tmp_path, charset):
    """Headers in raw 8-bit bytes (RFC 6532 allows UTF-8; some Chinese clients write GBK) go through decode_text."""
    raw = (
        f"Subject: 部署前请备份数据库\nFrom: 王喆 <wang.zhe@acme.cn>\n"
        f"Content-Type: text/plain; charset={charset}\n\n正文。\n"
    )
    (tmp_path / "raw.eml").write_bytes(raw.encode(charset))
    doc = parse_file(tmp_path / "raw.eml")
    assert (doc.email.subject, doc.email.sender, doc.text) == (
        "部署前请备份数据库",
        "王喆 <wang.zhe@acme.cn>",
        "正文。",
    )


def test_msg_maps_header_body_and_attachments(tmp_path, monkeypatch):
    """A stand-in for oxmsg's Message (see the module docstring): what partition_msg reads from it."""
    attachment = SimpleNamespace(
        file_name="minutes.txt",
        file_bytes=MINUTES.encode("gbk"),
        attached_by_value=True,
        mime_type="text/plain",
        properties=SimpleNamespace(str_prop_value=lambda pid: None),
    )
    loaded = SimpleNamespace(
        subject="季度报告",
        sender='"王喆" <wang.zhe@acme.cn>',
        body="本季度销售额增长了百分之十二。",
        html_body=None,
        sent_date=dt.datetime(2024, 3, 5, 1, 30, tzinfo=dt.UTC),
        attachments=(attachment,),
    )
    monkeypatch.setattr(oxmsg.Message, "load", classmethod(lambda cls, raw: loaded))
    (tmp_path / "report.msg").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1 stand-in")
    doc = parse_file(tmp_path / "report.msg")
    assert (doc.email.subject, doc.email.sender, doc.email.sent_at) == (
        "季度报告",
        '"王喆" <wang.zhe@acme.cn>',
        "2024-03-05T01:30:00+00:00",
    )
    assert [(c.email_part, c.text) for c in doc.chunks] == [
        ("body", "本季度销售额增长了百分之十二。"),
        ("minutes.txt", "会议纪要"),
        ("minutes.txt", "部署前请备份数据库。回滚步骤见第三节。"),
    ]
    assert doc.encoding is None
