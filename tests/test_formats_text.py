"""Text formats end to end: encodings other than UTF-8 come out as the right characters, XML and Org parse."""

from __future__ import annotations

import pytest

from citekeeper.integrity import misplaced_offsets
from citekeeper.store import CorpusStore
from parsers.formats.text import UndecodableText, decode_text
from parsers.ingest import ingest

CP1252_HTML = (
    '<html><head><meta charset="iso-8859-1"><title>Menu</title></head><body><h1>Caf\xe9 menu</h1>'
    "<p>\u201cSmart quotes\u201d and caf\xe9 cr\xe8me \u2014 served daily.</p></body></html>"
)
LATIN1_MD = (
    "---\ntitle: Caf\xe9 cr\xe8me\naccess_scope: internal_only\n---\n"
    "# R\xe9sum\xe9\n\nCr\xe8me br\xfbl\xe9e is served daily at the caf\xe9.\n"
)
GBK_TXT = "运维手册\n\n部署前请备份数据库。本季度销售额增长了百分之十二，详见第三节。\n"
LATIN1_XML = (
    '<?xml version="1.0" encoding="ISO-8859-1"?>\n'
    "<menu><item>Caf\xe9 cr\xe8me</item><item>Cr\xe8me br\xfbl\xe9e is served daily.</item></menu>\n"
)
ORG = "* Deploy\n\nBack up the database first.\n\n** Rollback\n\n- Stop the service.\n- 恢复数据库备份。\n"


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> tuple[CorpusStore, str, dict[str, str]]:
    """One ingest of every case: (store, version, {source_path: reason} of the quarantined files)."""
    root = tmp_path_factory.mktemp("formats_text")
    source = root / "src"
    source.mkdir()
    (source / "menu.html").write_bytes(CP1252_HTML.encode("cp1252"))
    (source / "dessert.md").write_bytes(LATIN1_MD.encode("latin-1"))
    (source / "runbook.txt").write_bytes(GBK_TXT.encode("gbk"))
    (source / "unicode.txt").write_bytes("Caf\xe9 au lait, 咖啡。\n".encode("utf-16"))
    (source / "menu.xml").write_bytes(LATIN1_XML.encode("latin-1"))
    (source / "deploy.org").write_bytes(ORG.encode("utf-8"))
    (source / "broken.txt").write_bytes(b"caf\x81 \xff is not text in any encoding\n")
    (source / "broken.md").write_bytes(b"---\ntitle: x\n---\nbad \x81\xff bytes\n")
    store = CorpusStore(root / "store")
    result = ingest(source, store)
    errors = {e.source_path: e for e in result.errors}
    return store, result.manifest.name, errors


def document(ingested, doc_id: str) -> dict:
    store, version, _ = ingested
    rows = store.read_documents(version, doc_ids=[doc_id]).to_dicts()
    assert len(rows) == 1, doc_id
    return rows[0]


def test_offsets_reproduce_the_text(ingested):
    store, version, _ = ingested
    chunks = store.read_chunks(version)
    assert misplaced_offsets(chunks, store.read_documents(version)).height == 0
    assert set(chunks["doc_id"]) == {"menu.html", "dessert.md", "runbook.txt", "unicode.txt", "menu.xml", "deploy.org"}


def test_cp1252_html_declared_as_latin1(ingested):
    doc = document(ingested, "menu.html")
    assert "\u201cSmart quotes\u201d and caf\xe9 cr\xe8me \u2014 served daily." in doc["text"]
    assert doc["encoding"] == "cp1252"  # ISO-8859-1 is read as its superset, as browsers read it


def test_latin1_markdown_with_front_matter(ingested):
    doc = document(ingested, "dessert.md")
    assert "Cr\xe8me br\xfbl\xe9e is served daily at the caf\xe9." in doc["text"]
    assert doc["text"].startswith("R\xe9sum\xe9")  # the front matter is metadata, not text
    assert (doc["title"], doc["access_scope"]) == ("Caf\xe9 cr\xe8me", "internal_only")  # read at discovery
    assert doc["encoding"] == "cp1252"


def test_gbk_chinese_text(ingested):
    doc = document(ingested, "runbook.txt")
    assert "部署前请备份数据库。本季度销售额增长了百分之十二，详见第三节。" in doc["text"]
    assert doc["encoding"] == "gb18030"


def test_utf16_with_bom(ingested):
    doc = document(ingested, "unicode.txt")
    assert (doc["text"], doc["encoding"]) == ("Caf\xe9 au lait, 咖啡。", "utf-16")


def test_xml_obeys_its_declaration(ingested):
    doc = document(ingested, "menu.xml")
    assert "Caf\xe9 cr\xe8me" in doc["text"] and "Cr\xe8me br\xfbl\xe9e is served daily." in doc["text"]
    assert doc["encoding"] == "cp1252"


def test_org(ingested):
    doc = document(ingested, "deploy.org")
    for expected in ("Deploy", "Back up the database first.", "Rollback", "Stop the service.", "恢复数据库备份。"):
        assert expected in doc["text"]
    store, version, _ = ingested
    chunks = store.read_chunks(version, doc_ids=["deploy.org"])
    assert ["Deploy", "Rollback"] in chunks["section_path"].to_list()
    assert doc["encoding"] == "utf-8"


def test_undecodable_bytes_are_quarantined_with_their_offset(ingested):
    _, _, errors = ingested
    broken = errors["broken.txt"]
    assert (broken.stage, broken.error_type) == ("read", "EncodingError")
    assert "byte 0x81 at offset 3" in broken.reason and "re-save the file as UTF-8" in broken.reason
    # Markdown is decoded at discovery already (its front matter may set access_scope): quarantined there.
    assert (errors["broken.md"].stage, errors["broken.md"].error_type) == ("read", "EncodingError")
    assert "offset 21" in errors["broken.md"].reason
    assert set(errors) == {"broken.txt", "broken.md"}


@pytest.mark.parametrize(
    ("raw", "declared", "expected"),
    [
        ("caf\xe9".encode(), None, ("caf\xe9", "utf-8")),
        (b"plain ASCII", None, ("plain ASCII", "utf-8")),
        ("\ufeffcaf\xe9".encode("utf-8"), "iso-8859-1", ("caf\xe9", "utf-8-sig")),  # a BOM outranks a declaration
        ("caf\xe9".encode(), "iso-8859-1", ("caf\xc3\xa9", "cp1252")),  # the declaration is followed
        ("王喆".encode("gbk"), "gb2312", ("王喆", "gb18030")),  # 喆 is GBK, not GB2312
        ("caf\xe9".encode(), "utf-16", ("caf\xe9", "utf-8")),  # a UTF-16 <meta> was read as ASCII: ignored
        ("caf\xe9".encode(), "no-such-charset", ("caf\xe9", "utf-8")),
        ("Hello, world".encode("utf-16-le"), None, ("Hello, world", "utf-16-le")),  # NULs: UTF-16 without a BOM
        ("Hello, world".encode("utf-16-be"), None, ("Hello, world", "utf-16-be")),
        ("Hi".encode("utf-16-le"), None, ("Hi", "utf-16-le")),
        (("部署前请备份数据库。\n" * 8).encode("utf-16-le"), None, ("部署前请备份数据库。\n" * 8, "utf-16-le")),
        (
            b"# Notes\n\nThe deploy runs nightly.\x00 Back up first.\n",
            None,
            ("# Notes\n\nThe deploy runs nightly.\x00 Back up first.\n", "utf-8"),
        ),  # a stray NUL is not UTF-16
        (b"ab\x00\x00\x00\x00cd", None, ("ab\x00\x00\x00\x00cd", "utf-8")),  # NULs on both parities
        ("你好，世界。".encode("gbk"), None, ("你好，世界。", "gb18030")),
        ("It\u2019s the team\u2019s job.".encode("cp1252"), None, ("It\u2019s the team\u2019s job.", "cp1252")),
    ],
)
def test_decode_rule(raw, declared, expected):
    assert decode_text(raw, declared) == expected


def test_decode_never_replaces_a_byte():
    with pytest.raises(UndecodableText, match=r"byte 0x81 at offset 4 is not UTF-8"):
        decode_text(b"text\x81\xff", "iso-2022-jp")
    with pytest.raises(UndecodableText, match=r"not valid UTF-16 although it starts with its byte-order mark"):
        decode_text(b"\xff\xfe\x00\xd8")
