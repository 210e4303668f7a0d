"""The model behind tests/test_status_model.py (issue #20): corpora, random edit scripts and the oracle.

Nothing here imports the code under test (citekeeper, parsers, verifiers, assets, pipelines): the oracle derives
every expected status, locator and re-anchoring span from the edit script alone. The writers at the end
(Markdown, .xlsx through openpyxl, .pdf through fpdf2, .pptx through python-pptx) only make the files.

The model
---------
A corpus is a tuple of documents. A document is a tuple of containers: Markdown has one; a workbook has its
sheets, whose slots are its rows (None is a blank row); a PDF has its pages (an empty page is a blank page); a
deck has its slides, each holding one paragraph or none (a blank slide). Every paragraph instance carries a
uid that follows it through the script, so copies of a repeated paragraph are told apart by position and the
oracle knows which copy an edit touched. A document's canonical text is its paragraphs joined by a blank
line; each paragraph is exactly one chunk (its length is in PARA_MIN..PARA_MAX, i.e. more than half of
MAX_CHUNK_CHARS and at most all of it, so the greedy packer never merges two).

Answers cite paragraphs of v1 by chunk (`Cite`), and some cite by document what registration cannot anchor
(`DocCite`: a document v1 lacks, or a quote in none of its text): their rows are invalid, the others unaffected.

Audiences (issue 31): a document may be open only to some access groups (its sidecar's `access_groups`; an edit
may change them, `SetGroups`), an answer may name the groups it was given to. A citation of a document closed to
its answer's audience, in v1 or in v2, or whose paragraph now sits in such a document, is out_of_scope; nothing is
ever re-anchored or repaired into a document closed to the answer's audience.

What the generator stays away from (situations where two edit scripts give the same files but different
answers, or where the similarity matcher's choice is a coin toss) is checked by `problems()` after every
operation; an operation that would create one is dropped.
"""

from __future__ import annotations

import datetime
import io
import json
import random
import shutil
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import pairwise
from pathlib import Path

from hypothesis import strategies as st
from rapidfuzz import fuzz

MAX_CHUNK_CHARS = 200
PARA_MIN, PARA_MAX = MAX_CHUNK_CHARS // 2 + 5, MAX_CHUNK_CHARS - 5
SEPARATOR = "\n\n"  # between elements in a document's canonical text
FORMATS = ("md", "xlsx", "pdf", "pptx")
EXTENSION = {"md": "md", "xlsx": "xlsx", "pdf": "pdf", "pptx": "pptx"}
SIDECAR_SUFFIX = ".citekeeper.json"

# The similarity matcher of the diff (rapidfuzz fuzz.ratio, threshold 0.5, greedy within a document). The
# generator keeps every decision it has to make far from a tie.
EDIT_MIN_RATIO = 0.7  # an edited paragraph against its original
INSERT_MAX_RATIO = 0.35  # an inserted paragraph against every paragraph of its document
LEFTOVER_MAX_RATIO = 0.45  # a deleted paragraph against an inserted or duplicated one (threshold 0.5)
EDIT_MARGIN = 0.1  # an edited pair beats every other pair it could be confused with by this much

# Blank PDF pages have no text layer: the parser renders and OCRs them (Tesseract, Poppler).
BLANK_PAGES = bool(shutil.which("tesseract") and shutil.which("pdftoppm"))
CJK_FONTS = (
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
)
CJK_FONT = next((font for font in CJK_FONTS if Path(font).exists()), None)  # Chinese in PDFs needs one


# ---------------------------------------------------------------------------------------------------- text
# Paragraphs are three sentences. Original paragraphs come from the "en" and "zh" pools; inserted ones from
# "EN" (upper case English) and "ZH" (other Chinese words), which share next to nothing with them
# character by character, so fuzz.ratio against the originals stays near 0.2. Chinese sentences keep spaces
# between words: unstructured takes a line of 12 words or fewer for a Title, which would open a section.

EN_NOUNS = """cache worker token gateway snapshot pool request route batch index shard replica ledger parser
buffer socket queue schema vector cursor signal timer thread kernel module plugin bundle layout widget client
server proxy archive mirror backup folder record column filter report metric sample tracer monitor runner
engine driver adapter budget invoice meeting sensor window garden river bridge harbor market ticket""".split()
EN_VERBS = "keeps checks prunes routes stores sends reads writes merges splits loads drops tracks signs builds".split()
EN_ADJS = "stale fresh local remote small large quiet busy early late hidden shared weekly nightly spare".split()
EN_UPPER = """NORTH SOUTH VALLEY BARLEY OATS WINTER SUMMER FARMER HILLS MOUNTAIN LANTERN CASTLE KNIGHT DRAGON
HARVEST ORCHARD MEADOW SHEPHERD VILLAGE TAVERN MILLER BAKER CANDLE FOREST WOLVES FROST AMBER COPPER""".split()
EN_UPPER_VERBS = "GUARDS WATCHES FEEDS CROSSES PAINTS FOLLOWS CARRIES SHELTERS".split()
ZH_WORDS = """前端 构建 工具 开发 体验 服务器 原生 模块 功能 打包 代码 输出 优化 静态 资源 配置 插件 缓存 请求 路由
数据 索引 分片 副本 账本 解析 缓冲 队列 模式 向量 游标 信号 定时 线程 内核 组件 布局 客户 代理 归档 镜像 备份
目录 记录 过滤 报告 指标 样本 监控 引擎 驱动 适配 预算 发票 会议 窗口""".split()
ZH_TERMS = "Vite Rollup ES API CLI Vue JSON HTTP SQL Node npm Git".split()
ZH_OTHER = """山谷 麦田 冬天 夏日 农夫 群山 灯笼 城堡 骑士 飞龙 丰收 果园 草地 牧羊 村庄 酒馆 磨坊 面包 蜡烛 森林
狼群 白雪 霜冻 琥珀 黄铜 河流 小桥 港湾 集市 车票""".split()
ZH_OTHER_TERMS = "ALPHA BRAVO DELTA OSCAR TANGO ZULU".split()

POOL_LANG = {"en": "en", "EN": "en", "zh": "zh", "ZH": "zh"}
INSERT_POOLS = {"en": ("EN", "ZH"), "zh": ("ZH", "EN")}  # for a document of mostly this language


def _en(r: random.Random) -> str:
    return (
        f"The {r.choice(EN_ADJS)} {r.choice(EN_NOUNS)} {r.choice(EN_VERBS)} {r.choice(EN_ADJS)} "
        f"{r.choice(EN_NOUNS)}s near the {r.choice(EN_NOUNS)}."
    )


def _en_upper(r: random.Random) -> str:
    return (
        f"THE {r.choice(EN_UPPER)} {r.choice(EN_UPPER_VERBS)} {r.choice(EN_UPPER)} AND {r.choice(EN_UPPER)} "
        f"BY THE {r.choice(EN_UPPER)}."
    )


def _zh_words(r: random.Random, words: list[str], n: int) -> list[str]:
    return [r.choice(words) + r.choice(words) for _ in range(n)]


def _zh(r: random.Random, words: list[str] = ZH_WORDS, terms: list[str] = ZH_TERMS) -> str:
    ws = _zh_words(r, words, r.randint(7, 9))
    return f"{r.choice(terms)} {' '.join(ws[:4])}，{' '.join(ws[4:])}。"


SENTENCE = {"en": _en, "EN": _en_upper, "zh": _zh, "ZH": lambda r: _zh(r, ZH_OTHER, ZH_OTHER_TERMS)}


def join_sentences(sentences: tuple[str, ...], lang: str) -> str:
    return (" " if lang == "en" else "").join(sentences)


def ratio(a: str, b: str) -> float:
    return fuzz.ratio(a, b) / 100.0


class Texts:
    """Deterministic text for one example (seeded): every sentence is new to the example."""

    def __init__(self, seed: int):
        self.random = random.Random(seed)
        self.used: set[str] = set()

    def sentence(self, pool: str) -> str:
        while True:
            sentence = SENTENCE[pool](self.random)
            if sentence not in self.used:
                self.used.add(sentence)
                return sentence

    def sentences(self, pool: str) -> tuple[str, ...]:
        """Three new sentences whose paragraph is one chunk long."""
        while True:
            sentences = tuple(self.sentence(pool) for _ in range(3))
            if PARA_MIN <= len(join_sentences(sentences, POOL_LANG[pool])) <= PARA_MAX:
                return sentences

    def edited(self, para: Para, index: int, rewrite: bool) -> str | None:
        """A replacement for sentence `index` of `para`: one word changed (reword) or a new sentence of the
        paragraph's own pool (rewrite); None when the paragraph would no longer be one chunk."""
        old = para.sentences[index]
        if rewrite:
            new = self.sentence(para.lang)
        else:
            words = old.split(" ")
            if para.lang == "en":  # "The <adj> ...": another adjective
                words[1] = self.random.choice([a for a in EN_ADJS if a != words[1]])
            else:  # "<term> <word> ...": another word
                words[1] = "".join(_zh_words(self.random, ZH_WORDS, 1))
            new = " ".join(words)
            if new in self.used or new == old:
                return None
            self.used.add(new)
        sentences = (*para.sentences[:index], new, *para.sentences[index + 1 :])
        return new if PARA_MIN <= len(join_sentences(sentences, para.lang)) <= PARA_MAX else None


# ---------------------------------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Para:
    uid: str  # p<n>: a paragraph of v1; x<n>: inserted; c<n>: a duplicated copy
    sentences: tuple[str, ...]
    lang: str  # en | zh: how its sentences are joined, and the language of an answer citing it

    @property
    def text(self) -> str:
        return join_sentences(self.sentences, self.lang)

    def __repr__(self) -> str:
        return f"{self.uid}:{_short(self.text)}"


def _short(text: str, n: int = 48) -> str:
    return repr(text if len(text) <= n else text[: n - 1] + "…")


@dataclass(frozen=True)
class Container:
    name: str | None  # a sheet's name; None for the other formats
    slots: tuple[Para | None, ...]  # rows of a sheet (None: a blank row), paragraphs of a page or slide


@dataclass(frozen=True)
class Placed:
    """A paragraph where it sits in one version: its span of the canonical text and its native locator."""

    para: Para
    doc: Doc
    index: int  # among the document's paragraphs
    start: int
    end: int
    locator: str | None  # the line a status row shows (e.g. "sheet Q3 · row 2", "page 1", "slide 3")
    native: dict  # the chunk columns the locator comes from

    @property
    def occurrence(self) -> int:
        """How many copies of its text come before it in its document: with the doc_id and the text, what
        the chunk_id is made of."""
        return sum(p.para.text == self.para.text for p in self.doc.placed[: self.index])


@dataclass(frozen=True)
class Doc:
    key: str  # D<n>: the document's identity through the script
    fmt: str  # md | xlsx | pdf | pptx
    path: str  # source path under the corpus root
    explicit_id: str | None  # from the sidecar <path>.citekeeper.json; None: the doc_id is the path
    containers: tuple[Container, ...]
    access_groups: tuple[str, ...] | None = None  # from the sidecar too; None: open to every audience

    @property
    def doc_id(self) -> str:
        return self.explicit_id or self.path

    @property
    def paragraphs(self) -> list[Para]:
        return [slot for container in self.containers for slot in container.slots if slot is not None]

    @property
    def text(self) -> str:
        return SEPARATOR.join(p.text for p in self.paragraphs)

    @cached_property
    def placed(self) -> list[Placed]:
        out, position = [], 0
        for ci, container in enumerate(self.containers):
            for si, para in enumerate(container.slots):
                if para is None:
                    continue
                if out:
                    position += len(SEPARATOR)
                locator, native = self._locator(ci, si, container)
                out.append(Placed(para, self, len(out), position, position + len(para.text), locator, native))
                position += len(para.text)
        return out

    def _locator(self, ci: int, si: int, container: Container) -> tuple[str | None, dict]:
        none = {
            "page_start": None,
            "page_end": None,
            "slide_number": None,
            "sheet_name": None,
            "row_start": None,
            "row_end": None,
        }
        if self.fmt == "xlsx":
            return f"sheet {container.name} · row {si + 1}", none | {
                "sheet_name": container.name,
                "row_start": si + 1,
                "row_end": si + 1,
            }
        if self.fmt == "pdf":
            return f"page {ci + 1}", none | {"page_start": ci + 1, "page_end": ci + 1}
        if self.fmt == "pptx":
            return f"slide {ci + 1}", none | {"slide_number": ci + 1}
        return None, none

    def find(self, uid: str) -> tuple[int, int] | None:
        for ci, container in enumerate(self.containers):
            for si, para in enumerate(container.slots):
                if para is not None and para.uid == uid:
                    return ci, si
        return None

    def describe(self) -> str:
        groups = f", access_groups {list(self.access_groups)}" if self.access_groups is not None else ""
        head = (
            f"{self.key} {self.path} ({self.fmt}{', doc_id ' + self.explicit_id if self.explicit_id else ''}{groups})"
        )
        lines = [head]
        for ci, container in enumerate(self.containers):
            label = {"xlsx": f"sheet {container.name}", "pdf": f"page {ci + 1}", "pptx": f"slide {ci + 1}"}.get(
                self.fmt
            )
            if label:
                lines.append(f"    {label}:" + (" (blank)" if not any(container.slots) else ""))
            for si, para in enumerate(container.slots):
                where = f"row {si + 1}: " if self.fmt == "xlsx" else ""
                lines.append(f"      {where}{'(blank row)' if para is None else repr(para)}")
        return "\n".join(lines)


Corpus = tuple[Doc, ...]


def doc_by_key(corpus: Corpus, key: str) -> Doc:
    return next(doc for doc in corpus if doc.key == key)


def locate(corpus: Corpus, uid: str) -> Placed | None:
    for doc in corpus:
        for placed in doc.placed:
            if placed.para.uid == uid:
                return placed
    return None


def _with_doc(corpus: Corpus, doc: Doc) -> Corpus:
    return tuple(doc if d.key == doc.key else d for d in corpus)


def _set_container(doc: Doc, ci: int, container: Container | None) -> Doc:
    """Replace container ci (None: drop it)."""
    containers = list(doc.containers)
    if container is None:
        del containers[ci]
    else:
        containers[ci] = container
    return replace(doc, containers=tuple(containers))


def remove_para(doc: Doc, uid: str) -> Doc:
    """Take a paragraph out: a Markdown paragraph or a sheet's row goes (the rows below move up); a slide goes
    with its paragraph; a page its last paragraph leaves goes too (a deliberately blank page stays blank)."""
    ci, si = doc.find(uid)
    container = doc.containers[ci]
    slots = container.slots[:si] + container.slots[si + 1 :]
    if doc.fmt in ("pdf", "pptx") and not slots:
        return _set_container(doc, ci, None)
    return _set_container(doc, ci, replace(container, slots=slots))


def insert_para(doc: Doc, at: tuple[int, int], para: Para | None) -> Doc:
    """Put a paragraph (or, with None, a blank row / page / slide) at `at`: (container, slot) for Markdown,
    sheets and pages; (slide position, 0) for a deck, whose every paragraph is a slide of its own. A blank
    page or slide is inserted at (position, 0)."""
    ci, si = at
    containers = list(doc.containers)
    if doc.fmt == "pptx" or (doc.fmt == "pdf" and para is None):
        containers.insert(ci, Container(None, () if para is None else (para,)))
    else:
        container = containers[ci]
        containers[ci] = replace(container, slots=(*container.slots[:si], para, *container.slots[si:]))
    return replace(doc, containers=tuple(containers))


def insertion_points(doc: Doc) -> list[tuple[int, int]]:
    """Where a paragraph may go."""
    if doc.fmt == "pptx":
        return [(ci, 0) for ci in range(len(doc.containers) + 1)]
    if doc.fmt == "pdf":  # at most three lines on a page
        return [(ci, si) for ci, c in enumerate(doc.containers) if len(c.slots) < 3 for si in range(len(c.slots) + 1)]
    return [(ci, si) for ci, c in enumerate(doc.containers) for si in range(len(c.slots) + 1)]


def blank_points(doc: Doc) -> list[tuple[int, int]]:
    """Where a blank row (xlsx), page (pdf) or slide (pptx) may go."""
    if doc.fmt == "xlsx":
        return [(ci, si) for ci, c in enumerate(doc.containers) for si in range(len(c.slots) + 1)]
    if doc.fmt == "pptx" or (doc.fmt == "pdf" and BLANK_PAGES):
        return [(ci, 0) for ci in range(len(doc.containers) + 1)]
    return []


# ---------------------------------------------------------------------------------------------------- ops


@dataclass(frozen=True)
class Insert:
    doc: str
    at: tuple[int, int]
    para: Para

    def apply(self, corpus: Corpus) -> Corpus:
        return _with_doc(corpus, insert_para(doc_by_key(corpus, self.doc), self.at, self.para))

    def __repr__(self) -> str:
        return f"insert {self.para!r} into {self.doc} at {self.at}"


@dataclass(frozen=True)
class Delete:
    uid: str

    def apply(self, corpus: Corpus) -> Corpus:
        doc = locate(corpus, self.uid).doc
        return _with_doc(corpus, remove_para(doc, self.uid))

    def __repr__(self) -> str:
        return f"delete {self.uid}"


@dataclass(frozen=True)
class Move:
    uid: str
    doc: str  # the document it goes to (the same one, or another)
    at: tuple[int, int]  # in that document once the paragraph has left its place

    def apply(self, corpus: Corpus) -> Corpus:
        placed = locate(corpus, self.uid)
        corpus = _with_doc(corpus, remove_para(placed.doc, self.uid))
        return _with_doc(corpus, insert_para(doc_by_key(corpus, self.doc), self.at, placed.para))

    def __repr__(self) -> str:
        return f"move {self.uid} to {self.doc} at {self.at}"


@dataclass(frozen=True)
class Duplicate:
    uid: str
    copy_uid: str
    at: tuple[int, int]  # in the paragraph's own document

    def apply(self, corpus: Corpus) -> Corpus:
        placed = locate(corpus, self.uid)
        return _with_doc(corpus, insert_para(placed.doc, self.at, replace(placed.para, uid=self.copy_uid)))

    def __repr__(self) -> str:
        return f"duplicate {self.uid} as {self.copy_uid} at {self.at}"


@dataclass(frozen=True)
class Edit:
    uid: str
    sentence: int  # which of its sentences is replaced
    new: str

    def apply(self, corpus: Corpus) -> Corpus:
        placed = locate(corpus, self.uid)
        para = placed.para
        edited = replace(
            para, sentences=(*para.sentences[: self.sentence], self.new, *para.sentences[self.sentence + 1 :])
        )
        ci, si = placed.doc.find(self.uid)
        container = placed.doc.containers[ci]
        slots = (*container.slots[:si], edited, *container.slots[si + 1 :])
        return _with_doc(corpus, _set_container(placed.doc, ci, replace(container, slots=slots)))

    def __repr__(self) -> str:
        return f"edit {self.uid} sentence {self.sentence} -> {_short(self.new, 60)}"


@dataclass(frozen=True)
class InsertBlank:
    doc: str
    at: tuple[int, int]
    what: str  # row | page | slide

    def apply(self, corpus: Corpus) -> Corpus:
        return _with_doc(corpus, insert_para(doc_by_key(corpus, self.doc), self.at, None))

    def __repr__(self) -> str:
        return f"insert a blank {self.what} into {self.doc} at {self.at}"


@dataclass(frozen=True)
class RenameSheet:
    doc: str
    sheet: int
    name: str

    def apply(self, corpus: Corpus) -> Corpus:
        doc = doc_by_key(corpus, self.doc)
        return _with_doc(corpus, _set_container(doc, self.sheet, replace(doc.containers[self.sheet], name=self.name)))

    def __repr__(self) -> str:
        return f"rename sheet {self.sheet} of {self.doc} to {self.name!r}"


@dataclass(frozen=True)
class MoveFile:
    doc: str
    path: str  # the sidecar, if any, goes with it

    def apply(self, corpus: Corpus) -> Corpus:
        return _with_doc(corpus, replace(doc_by_key(corpus, self.doc), path=self.path))

    def __repr__(self) -> str:
        return f"move file {self.doc} to {self.path}"


@dataclass(frozen=True)
class SetGroups:
    doc: str
    groups: tuple[str, ...] | None  # its sidecar's access_groups from now on (None: open to all)

    def apply(self, corpus: Corpus) -> Corpus:
        return _with_doc(corpus, replace(doc_by_key(corpus, self.doc), access_groups=self.groups))

    def __repr__(self) -> str:
        return f"set the access_groups of {self.doc} to {None if self.groups is None else list(self.groups)}"


Op = Insert | Delete | Move | Duplicate | Edit | InsertBlank | RenameSheet | MoveFile | SetGroups
TOUCHING = {Delete: "deleted", Move: "moved", Duplicate: "duplicated", Edit: "edited"}  # ops on one v1 paragraph


def apply_all(corpus: Corpus, ops) -> Corpus:
    for op in ops:
        corpus = op.apply(corpus)
    return corpus


# ---------------------------------------------------------------------------------------------------- answers


@dataclass(frozen=True)
class Cite:
    uid: str  # a paragraph of v1
    quote: int | None  # the sentence of it quoted; None: no quote, the whole chunk is the evidence

    def __repr__(self) -> str:
        return f"{self.uid}" + ("" if self.quote is None else f"/s{self.quote}")


@dataclass(frozen=True)
class Answer:
    answer_id: str
    form: str  # structured | marker
    lang: str  # en | zh: the language of its claims
    cites: tuple[AnyCite, ...]
    audience: tuple[str, ...] | None = None  # the groups it was given to; None: not said, nothing checked

    def __repr__(self) -> str:
        audience = "" if self.audience is None else f", audience {list(self.audience)}"
        return f"{self.answer_id} ({self.form}, {self.lang}{audience}): {', '.join(map(repr, self.cites))}"


# Registration anchors a quote exactly, then normalised, then fuzzily at partial_ratio >= 0.9 (docs/answers.md,
# "Citations by document"). A quote meant to anchor nowhere stays this far from every window of the text.
UNANCHORED_MAX_RATIO = 0.75
NOT_ANCHORED = "not anchored at registration"  # how an unanchored citation's invalid reason starts
INVENTED_NAMES = ("retired/guide-d9.md", "kb-retired", "归档/手册-d9.md")  # documents no script has


@dataclass(frozen=True)
class DocCite:
    """A citation by document (doc_id or source_path, with a quote) that registration cannot anchor in v1: the
    document it names is not in v1 (`quote` is then any sentence), or `quote` is in no text of it."""

    uid: str  # u<n>: its name in the script; it cites no paragraph
    by: str  # doc_id | source_path: the key that names the document
    name: str
    quote: str
    lang: str  # of the quote: the language of an answer citing it first

    def __repr__(self) -> str:
        return f"{self.uid}:{self.by}={self.name!r}/{_short(self.quote, 24)}"


AnyCite = Cite | DocCite


def named_document(old: Corpus, cite: DocCite) -> Doc | None:
    """The v1 document `cite` names, if v1 has it."""
    return next((doc for doc in old if (doc.doc_id if cite.by == "doc_id" else doc.path) == cite.name), None)


def cite_lang(old: Corpus, cite: AnyCite) -> str:
    return cite.lang if isinstance(cite, DocCite) else locate(old, cite.uid).para.lang


def quote_text(old: Corpus, cite: AnyCite) -> str | None:
    if isinstance(cite, DocCite):
        return cite.quote
    return None if cite.quote is None else locate(old, cite.uid).para.sentences[cite.quote]


# One claim per citation in marker form: as many as an answer may have (edit_scripts: max_cites + max_doc_cites).
EN_CLAIMS = [
    "The first point holds",
    "A second point follows",
    "Another point is made",
    "Then a fourth one",
    "A fifth point stands",
    "A sixth point stands",
    "A seventh point stands",
    "The last point stands",
]
ZH_CLAIMS = [
    "第一个论断成立",
    "第二个论断也成立",
    "另一个论断被提出",
    "还有第四个论断",
    "第五个论断成立",
    "第六个论断成立",
    "第七个论断成立",
    "最后一个论断成立",
]


def answer_record(answer: Answer, old: Corpus, chunk_ids: dict[str, str], version: str = "v1") -> dict:
    """The JSON record registered for `answer`, its citations pointing at the v1 chunk of each paragraph."""

    def citation(cite: AnyCite) -> dict:
        quote = quote_text(old, cite)
        named = {cite.by: cite.name} if isinstance(cite, DocCite) else {"chunk_id": chunk_ids[cite.uid]}
        return named | ({} if quote is None else {"quote": quote})

    record = {"answer_id": answer.answer_id, "question": "?", "corpus_version": version}
    if answer.audience is not None:
        record["audience"] = list(answer.audience)
    claims = ZH_CLAIMS if answer.lang == "zh" else EN_CLAIMS
    if answer.form == "structured":
        # One or two citations per claim.
        groups = [answer.cites[i : i + 2] for i in range(0, len(answer.cites), 2)]
        record["answer"] = ("" if answer.lang == "zh" else " ").join(
            claims[i] + ("。" if answer.lang == "zh" else ".") for i in range(len(groups))
        )
        record["claims"] = [
            {"text": claims[i], "citations": [citation(c) for c in group]} for i, group in enumerate(groups)
        ]
        return record
    # Marker form: one sentence per citation, every spelling of a marker next to a sentence end.
    sentences = []
    for i, _ in enumerate(answer.cites):
        ref = i + 1
        if answer.lang == "zh":
            sentences.append(f"{claims[i]}。[{ref}]" if i % 2 == 0 else f"{claims[i]}【{ref}】。")
        else:
            sentences.append(f"{claims[i]} [{ref}]." if i % 2 == 0 else f"{claims[i]}. [{ref}]")
    record["answer"] = " ".join(sentences)
    record["references"] = [{"ref": i + 1} | citation(c) for i, c in enumerate(answer.cites)]
    return record


# ---------------------------------------------------------------------------------------------------- script


@dataclass(frozen=True)
class EditScript:
    old: Corpus
    ops: tuple[Op, ...]
    answers: tuple[Answer, ...]

    @cached_property
    def new(self) -> Corpus:
        return apply_all(self.old, self.ops)

    @property
    def cites(self) -> list[tuple[Answer, AnyCite]]:
        return [(a, c) for a in self.answers for c in a.cites]

    def _repr_pretty_(self, printer, cycle) -> None:  # how hypothesis prints a falsifying example
        printer.text(repr(self))

    def __repr__(self) -> str:
        lines = ["EditScript(", "  v1:"]
        lines += ["    " + line for doc in self.old for line in doc.describe().splitlines()]
        lines.append("  ops:")
        lines += [f"    - {op!r}" for op in self.ops] or ["    (none)"]
        lines.append("  v2:")
        lines += ["    " + line for doc in self.new for line in doc.describe().splitlines()]
        lines.append("  answers:")
        lines += [f"    {a!r}" for a in self.answers]
        return "\n".join([*lines, ")"])


def touched(ops) -> dict[str, str]:
    """v1 paragraph uid -> what happened to it (deleted, moved, duplicated, edited)."""
    return {op.uid: TOUCHING[type(op)] for op in ops if type(op) in TOUCHING}


def problems(old: Corpus, new: Corpus, ops) -> list[str]:
    """Why this script is out of bounds (empty: fine). Checked after every operation the generator draws."""
    out = []
    kinds = touched(ops)
    uids = [op.uid for op in ops if type(op) in TOUCHING]
    if len(uids) != len(set(uids)):
        out.append("a v1 paragraph is touched twice")
    old_texts = Counter(p.text for d in old for p in d.paragraphs)
    new_texts = Counter(p.text for d in new for p in d.paragraphs)
    for op in ops:
        if isinstance(op, Move):
            text = locate(old, op.uid).para.text
            if old_texts[text] != 1 or new_texts[text] != 1:
                out.append(f"{op.uid} is moved but its text is not unique in the corpus")
    owner = {d.path: d.key for d in old}  # a path is one document's in both versions
    if len({d.path for d in new}) != len(new) or any(owner.get(d.path, d.key) != d.key for d in new):
        out.append("a path is used by two documents")
    for before in old:
        after = doc_by_key(new, before.key)
        out += [f"{before.key}: {p}" for p in _doc_problems(before, after, kinds)]
    return out


def _doc_problems(before: Doc, after: Doc, kinds: dict[str, str]) -> list[str]:
    out = []
    old_seq, new_seq = before.paragraphs, after.paragraphs
    if not new_seq:
        return ["no paragraph left"]
    if _adjacent_copy(old_seq) or _adjacent_copy(new_seq):
        out.append("two copies of one text are adjacent")
    if after.path != before.path and after.explicit_id is None and after.containers != before.containers:
        # Its doc_id changes with its path: only a pure rename pairs its chunks by text alone.
        out.append("a file whose doc_id follows its path is moved and changed")
    out += _repeat_problems(old_seq, new_seq, kinds)
    out += _similarity_problems(old_seq, new_seq, kinds)
    return out


def _repeat_problems(old_seq: list[Para], new_seq: list[Para], kinds: dict[str, str]) -> list[str]:
    """Copies of a repeated text are followed by position. That is only well defined when the copies that
    change (deleted, edited or duplicated: one kind per text) sit between different anchors: untouched
    paragraphs whose text is unique in both versions, which keep their order (no paragraph moves within the
    document). Then the pairing is the one longest common subsequence of the two paragraph sequences has."""
    out = []
    old_count, new_count = Counter(p.text for p in old_seq), Counter(p.text for p in new_seq)
    new_uids = {p.uid for p in new_seq}
    anchors = {
        p.uid
        for p in old_seq
        if p.uid not in kinds and p.uid in new_uids and old_count[p.text] == 1 and new_count[p.text] == 1
    }

    def gaps(seq: list[Para], text: str) -> list[int]:
        found, seen = [], 0
        for p in seq:
            seen += p.uid in anchors
            if p.text == text:
                found.append(seen)
        return found

    # A paragraph moved within the document is context too: [A, P, B] -> [P, A, B, P] (A moved, P duplicated)
    # could as well keep the original P after A as before B.
    moved_within = any(kinds.get(p.uid) == "moved" and p.uid in new_uids for p in old_seq)
    for text in {t for t, n in old_count.items() if n > 1} | {t for t, n in new_count.items() if n > 1}:
        changes = [kinds[p.uid] for p in old_seq if p.text == text and p.uid in kinds]
        if not changes:
            continue  # every copy stays: their order decides
        if len(set(changes)) > 1 or changes.count("edited") > 1:
            out.append(f"copies of one text are changed in different ways: {changes}")
        if moved_within:
            out.append("copies of one text change and a paragraph moves within the document")
        for seq in (old_seq, new_seq):
            found = gaps(seq, text)
            if len(found) != len(set(found)):
                out.append("two copies of one text sit between the same anchors")
    return out


def _similarity_problems(old_seq: list[Para], new_seq: list[Para], kinds: dict[str, str]) -> list[str]:
    """What the similarity matcher sees (the paragraphs no text match pairs) must leave it no close call."""
    out = []
    new_by_uid = {p.uid: p for p in new_seq}
    edited = [(p, new_by_uid[p.uid]) for p in old_seq if kinds.get(p.uid) == "edited"]
    deleted = [p for p in old_seq if kinds.get(p.uid) == "deleted"]
    old_left = [o for o, _ in edited] + deleted
    old_uids = {p.uid for p in old_seq}
    # Inserted and duplicated paragraphs; one moved in from another document is paired by its text before.
    added = [p for p in new_seq if p.uid not in old_uids and kinds.get(p.uid) != "moved"]
    new_left = [e for _, e in edited] + added
    for o, e in edited:
        r = ratio(o.text, e.text)
        if r < EDIT_MIN_RATIO:
            out.append(f"edited {o.uid} is too far from its original ({r:.2f})")
        rivals = [ratio(x.text, e.text) for x in old_left if x is not o] + [
            ratio(o.text, y.text) for y in new_left if y is not e
        ]
        if rivals and max(rivals) > r - EDIT_MARGIN:
            out.append(f"edited {o.uid} ({r:.2f}) has a rival at {max(rivals):.2f}")
    for d in deleted:
        for y in added:
            if ratio(d.text, y.text) >= LEFTOVER_MAX_RATIO:
                out.append(f"deleted {d.uid} is similar to {y.uid} ({ratio(d.text, y.text):.2f})")
    return out


# ---------------------------------------------------------------------------------------------------- reducing


def _refers_to(op: Op, old: Corpus) -> set[str]:
    """The keys of the documents an operation works on."""
    keys = {op.doc} if hasattr(op, "doc") else set()
    if hasattr(op, "uid"):
        keys.add(locate(old, op.uid).doc.key)
    return keys


def _valid(old: Corpus, ops, answers) -> EditScript | None:
    """The script, if it still applies and stays within bounds."""
    try:
        new = apply_all(old, ops)
    except (IndexError, AttributeError, StopIteration, TypeError):
        return None
    if problems(old, new, ops) or any(
        isinstance(c, Cite) and locate(old, c.uid) is None for a in answers for c in a.cites
    ):
        return None
    return EditScript(old, tuple(ops), tuple(answers))


def reductions(script: EditScript, keep: list[tuple[str, AnyCite]]):
    """Smaller scripts that still cite `keep` ((answer_id, cite) pairs), smallest steps last: one citation
    only, then without one operation, one document or one paragraph. For the test's minimiser: it keeps the
    first one that still fails the same way."""
    old, ops = script.old, list(script.ops)
    for answer_id, cite in keep:
        answer = next(a for a in script.answers if a.answer_id == answer_id)
        if len(script.cites) > 1:
            yield _valid(old, ops, [replace(answer, cites=(cite,))])
    for i in range(len(ops)):
        yield _valid(old, ops[:i] + ops[i + 1 :], script.answers)
    cited = {c.uid for _, c in script.cites}
    for doc in old:
        if (
            len(old) > 1
            and all(doc.key not in _refers_to(op, old) for op in ops)
            and not cited & {p.uid for p in doc.paragraphs}
        ):
            yield _valid(tuple(d for d in old if d.key != doc.key), ops, script.answers)
    busy = cited | {op.uid for op in ops if hasattr(op, "uid")}
    for doc in old:
        for para in doc.paragraphs:
            if para.uid not in busy and len(doc.paragraphs) > 1:
                yield _valid(_with_doc(old, remove_para(doc, para.uid)), ops, script.answers)


# ---------------------------------------------------------------------------------------------------- strategy

SHEET_NAMES = ("Q3", "预算", "Summary")
RENAMED_SHEETS = ("Q4", "决算", "Overview", "Notes")
STEMS = ("guide", "notes", "手册")
OP_KINDS = ("insert", "delete", "move", "duplicate", "edit", "blank", "rename_sheet", "move_file", "groups")
# A document's access_groups (sorted, as stored) and an answer's audience; None: open to all, not checked. () is
# an audience of nobody: every document with groups is closed to it.
ACCESS_GROUPS = (None, None, None, ("staff",), ("eu", "staff"), ("public",))
AUDIENCES = (None, None, ("public",), ("staff",), ("eu", "public"), ())


class _Builder:
    """The state of a script while the generator draws it."""

    def __init__(self, old: Corpus, texts: Texts):
        self.old, self.new, self.ops, self.texts = old, old, [], texts
        self.serial = 0

    def fresh(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def try_op(self, op: Op) -> bool:
        new = op.apply(self.new)
        if problems(self.old, new, [*self.ops, op]):
            return False
        self.new, self.ops = new, [*self.ops, op]
        return True

    def untouched(self) -> list[Para]:
        kinds = touched(self.ops)
        return [p for d in self.old for p in d.paragraphs if p.uid not in kinds]


def _allows(doc: Doc, para: Para) -> bool:
    return not (doc.fmt == "pdf" and para.lang == "zh" and CJK_FONT is None)


@st.composite
def documents(draw, key: str, texts: Texts, serial: list[int]) -> Doc:
    fmt = draw(st.sampled_from(FORMATS))
    lang = draw(st.sampled_from(["en", "zh", "mixed"] if fmt != "pdf" or CJK_FONT else ["en"]))

    def para() -> Para:
        serial[0] += 1
        pool = lang if lang != "mixed" else draw(st.sampled_from(["en", "zh"]))
        return Para(f"p{serial[0]}", texts.sentences(pool), pool)

    paras = [para() for _ in range(draw(st.integers(1, 4)))]
    # A repeated paragraph (Markdown mostly): a copy, never next to another copy.
    if len(paras) >= 2 and draw(st.sampled_from([True, True, False] if fmt == "md" else [True, False, False])):
        source = draw(st.integers(0, len(paras) - 1))
        spots = [i for i in range(len(paras) + 1) if i not in (source, source + 1)]
        if spots:
            serial[0] += 1
            paras.insert(draw(st.sampled_from(spots)), replace(paras[source], uid=f"p{serial[0]}"))
    if fmt == "md":
        containers = (Container(None, tuple(paras)),)
    elif fmt == "pptx":
        containers = tuple(Container(None, (p,)) for p in paras)
    else:  # sheets or pages: the paragraphs cut into 1-2 sheets, 1-3 pages (at most 3 a page)
        least = 1 if fmt == "xlsx" else -(-len(paras) // 3)
        n = draw(st.integers(min(least, len(paras)), min(len(paras), 2 if fmt == "xlsx" else 3)))
        while True:
            cuts = (
                sorted(draw(st.sets(st.integers(1, len(paras) - 1), min_size=n - 1, max_size=n - 1))) if n > 1 else []
            )
            bounds = [0, *cuts, len(paras)]
            groups = [tuple(paras[a:b]) for a, b in pairwise(bounds)]
            if fmt == "xlsx" or max(map(len, groups)) <= 3:
                break
        names = SHEET_NAMES if fmt == "xlsx" else [None] * 3
        containers = tuple(Container(names[i], group) for i, group in enumerate(groups))
    stem = STEMS[int(key[1:]) % len(STEMS)]
    explicit = f"kb-{key.lower()}" if draw(st.booleans()) else None
    return Doc(
        key, fmt, f"{stem}-{key.lower()}.{EXTENSION[fmt]}", explicit, containers, draw(st.sampled_from(ACCESS_GROUPS))
    )


def _repeated(doc: Doc) -> list[Para]:
    counts = Counter(p.text for p in doc.paragraphs)
    return [p for p in doc.paragraphs if counts[p.text] > 1]


def _apart(doc: Doc, points: list[tuple[int, int]], text: str) -> list[tuple[int, int]]:
    """The points where a paragraph of `text` would not stand next to a copy of it."""
    return [at for at in points if not _adjacent_copy(insert_para(doc, at, Para("?", (text,), "en")).paragraphs)]


def _adjacent_copy(seq: list[Para]) -> bool:
    return any(a.text == b.text for a, b in pairwise(seq))


def _propose(draw, kind: str, b: _Builder) -> Op | None:
    """One operation of `kind` on the current state, or None when there is nothing to apply it to."""

    def doc_where(ok) -> Doc | None:
        docs = [d for d in b.new if ok(d)]
        return draw(st.sampled_from(docs)) if docs else None

    if kind == "insert":
        doc = doc_where(lambda d: insertion_points(d))
        if doc is None:
            return None
        doc_lang = Counter(p.lang for p in doc.paragraphs).most_common(1)[0][0]
        pool = draw(st.sampled_from(INSERT_POOLS[doc_lang]))
        para = Para(b.fresh("x"), b.texts.sentences(pool), POOL_LANG[pool])
        others = [p.text for p in doc_by_key(b.old, doc.key).paragraphs] + [
            p.text for p in doc.paragraphs if p.uid.startswith("p")
        ]
        if not _allows(doc, para) or any(ratio(para.text, t) >= INSERT_MAX_RATIO for t in others):
            return None
        return Insert(doc.key, draw(st.sampled_from(insertion_points(doc))), para)
    if kind == "blank":
        doc = doc_where(lambda d: blank_points(d))
        if doc is None:
            return None
        what = {"xlsx": "row", "pdf": "page", "pptx": "slide"}[doc.fmt]
        return InsertBlank(doc.key, draw(st.sampled_from(blank_points(doc))), what)
    if kind == "rename_sheet":
        doc = doc_where(lambda d: d.fmt == "xlsx")
        if doc is None:
            return None
        taken = {c.name for d in (*b.old, *b.new) if d.key == doc.key for c in d.containers}
        names = [n for n in RENAMED_SHEETS if n not in taken]
        return RenameSheet(doc.key, draw(st.integers(0, len(doc.containers) - 1)), draw(st.sampled_from(names)))
    if kind == "groups":  # its sidecar's access_groups change, its text stays
        doc = doc_where(lambda d: True)
        return SetGroups(
            doc.key, draw(st.sampled_from([g for g in dict.fromkeys(ACCESS_GROUPS) if g != doc.access_groups]))
        )
    if kind == "move_file":  # once a document
        doc = doc_where(lambda d: d.path == doc_by_key(b.old, d.key).path)
        if doc is None:
            return None
        stem, ext = doc.path.rsplit(".", 1)
        folder = draw(st.sampled_from(["", "moved/", "archive/"]))
        return MoveFile(doc.key, f"{folder}{stem.rsplit('/', 1)[-1]}-{b.fresh('m')}.{ext}")
    # Operations on one paragraph of v1: a copy of a repeated one half the time, when there is one.
    candidates = b.untouched()
    if not candidates:
        return None
    repeated = [p for p in candidates if p in _repeated(locate(b.new, p.uid).doc)]
    if kind in ("move",):  # only a text unique in the corpus moves
        counts = Counter(p.text for d in b.new for p in d.paragraphs)
        candidates = [p for p in candidates if counts[p.text] == 1]
        repeated = []
        if not candidates:
            return None
    para = draw(st.sampled_from(repeated if repeated and draw(st.booleans()) else candidates))
    home = locate(b.new, para.uid).doc
    if kind == "delete":
        return Delete(para.uid)
    if kind == "edit":
        index = draw(st.integers(0, 2))
        new = b.texts.edited(para, index, rewrite=draw(st.booleans()))
        return None if new is None else Edit(para.uid, index, new)
    if kind == "duplicate":
        points = _apart(home, insertion_points(home), para.text)
        return Duplicate(para.uid, b.fresh("c"), draw(st.sampled_from(points))) if points else None
    if kind == "move":
        others = [d for d in b.new if d.key != home.key]
        target = draw(st.sampled_from(others)) if others and draw(st.booleans()) else home
        after_removal = remove_para(home, para.uid) if target.key == home.key else target
        points = insertion_points(after_removal)
        if not points or not _allows(target, para):
            return None
        return Move(para.uid, target.key, draw(st.sampled_from(points)))
    raise ValueError(kind)


def _doc_cite(draw, old: Corpus, new: Corpus, texts: Texts, uid: str) -> DocCite | None:
    """A citation by document registration cannot anchor in v1, or None when the quote drawn comes too close."""
    by = draw(st.sampled_from(["doc_id", "source_path"]))

    def name_of(doc: Doc) -> str:
        return doc.doc_id if by == "doc_id" else doc.path

    if draw(st.booleans()):  # a document v1 lacks: a name only v2 has, another key's name, or none's
        others = [d.path if by == "doc_id" else d.doc_id for d in old]
        names = sorted(({name_of(d) for d in new} | set(others) | set(INVENTED_NAMES)) - {name_of(d) for d in old})
        para = draw(st.sampled_from([p for d in old for p in d.paragraphs]))
        return DocCite(uid, by, draw(st.sampled_from(names)), draw(st.sampled_from(para.sentences)), para.lang)
    doc = draw(st.sampled_from(old))  # a quote in none of its text: a new sentence of another pool
    lang = Counter(p.lang for p in doc.paragraphs).most_common(1)[0][0]
    pool = draw(st.sampled_from(INSERT_POOLS[lang]))
    quote = texts.sentence(pool)
    if _closest_window(quote, doc.text) > UNANCHORED_MAX_RATIO:
        return None
    return DocCite(uid, by, name_of(doc), quote, POOL_LANG[pool])


def _closest_window(quote: str, text: str) -> float:
    """How close `quote` comes to any window of `text`, case aside (a normalised match would come to 1)."""
    return max(fuzz.partial_ratio(quote, text), fuzz.partial_ratio(quote.casefold(), text.casefold())) / 100.0


@st.composite
def edit_scripts(draw, max_docs: int = 3, max_ops: int = 8, max_cites: int = 5, max_doc_cites: int = 2) -> EditScript:
    texts = Texts(draw(st.integers(0, 2**20)))
    serial = [0]
    old = tuple(draw(documents(f"D{k}", texts, serial)) for k in range(draw(st.integers(1, max_docs))))
    builder = _Builder(old, texts)
    for _ in range(draw(st.integers(1, max_ops))):
        op = _propose(draw, draw(st.sampled_from(OP_KINDS)), builder)
        if op is not None:
            builder.try_op(op)
    # Citations of any v1 paragraph; the touched ones, and copies of repeated ones, more likely.
    kinds = touched(builder.ops)
    every = [p for d in old for p in d.paragraphs]
    repeated = [p for d in old for p in _repeated(d)]
    pool = every + 2 * [p for p in every if p.uid in kinds] + repeated
    cites = []
    for _ in range(draw(st.integers(1, max_cites))):
        cite = Cite(draw(st.sampled_from(pool)).uid, draw(st.sampled_from([0, None, 1, 2])))
        if cite not in cites:
            cites.append(cite)
    for _ in range(draw(st.integers(0, max_doc_cites))):
        doc_cite = _doc_cite(draw, old, builder.new, texts, builder.fresh("u"))
        if doc_cite is not None and doc_cite.quote not in {c.quote for c in cites if isinstance(c, DocCite)}:
            cites.insert(draw(st.integers(0, len(cites))), doc_cite)
    n_answers = draw(st.integers(1, min(3, len(cites))))
    groups: list[list[AnyCite]] = [[] for _ in range(n_answers)]
    for i, cite in enumerate(cites):
        groups[i if i < n_answers else draw(st.integers(0, n_answers - 1))].append(cite)
    answers = tuple(
        Answer(
            f"a{i}",
            draw(st.sampled_from(["structured", "marker"])),
            cite_lang(old, group[0]),
            tuple(group),
            draw(st.sampled_from(AUDIENCES)),
        )
        for i, group in enumerate(groups)
    )
    return EditScript(old, tuple(builder.ops), answers)


# ---------------------------------------------------------------------------------------------------- scenarios


def scenarios() -> dict[str, EditScript]:
    """Hand-written scripts, one per situation issue #20 names, so each is tested whatever hypothesis draws."""
    t = Texts(20)
    en = [Para(f"p{i}", t.sentences("en"), "en") for i in range(1, 5)]
    zh = [Para(f"p{i}", t.sentences("zh"), "zh") for i in range(5, 8)]
    P, A, B, C = en
    P2 = replace(P, uid="p9")  # the second copy of P
    Z, Y, X = zh
    Z2 = replace(Z, uid="p10")

    def script(docs, ops, *answers) -> EditScript:
        """Without answers: one that cites every paragraph three ways (no quote, its first and second sentence)."""
        everything = tuple(Cite(p.uid, q) for d in docs for p in d.paragraphs for q in (None, 0, 1))
        return EditScript(tuple(docs), tuple(ops), tuple(answers) or (Answer("a0", "structured", "en", everything),))

    def md(key, *paras, explicit=None, path=None, groups=None):
        return Doc(key, "md", path or f"{key.lower()}.md", explicit, (Container(None, paras),), groups)

    def edit(para, index):
        return Edit(para.uid, index, t.edited(para, index, rewrite=False))

    out = {
        "repeated paragraph, first copy deleted: the survivor keeps its citation": script(
            [md("D0", P, A, P2, B)], [Delete("p1")]
        ),
        "repeated paragraph, second copy deleted": script([md("D0", P, A, P2, B)], [Delete("p9")]),
        "repeated paragraph, one copy edited": script([md("D0", P, A, P2, B)], [edit(P, 1)]),
        "repeated paragraph, every copy kept, a paragraph moved after the second": script(
            [md("D0", P, A, B, P2)],
            [Move("p2", "D0", (0, 3)), Insert("D0", (0, 1), Para("x1", t.sentences("EN"), "en"))],
        ),
        "repeated paragraph, first copy edited to the same length: the second copy's chunk_id changes": script(
            [md("D0", P, A, P2)], [edit(P, 0)]
        ),
        "repeated paragraph, first copy deleted, a paragraph inserted after the one between": script(
            [md("D0", P, A, P2)], [Delete("p1"), Insert("D0", (0, 1), Para("x1", t.sentences("EN"), "en"))]
        ),
        "repeated paragraph, first copy edited, the paragraph after the one between deleted": script(
            [md("D0", P, A, B, P2)], [edit(P, 2), Delete("p3")]
        ),
        "repeated paragraph, a copy duplicated further down": script(
            [md("D0", P, A, P2, B)], [Duplicate("p9", "c1", (0, 4))]
        ),
        "paragraph inserted before, one deleted, one edited, one moved": script(
            [md("D0", P, A, B, C)],
            [
                Insert("D0", (0, 0), Para("x1", t.sentences("EN"), "en")),
                Delete("p2"),
                edit(B, 0),
                Move("p4", "D0", (0, 1)),
            ],
        ),
        "workbook: a blank row above, a sheet renamed": script(
            [Doc("D0", "xlsx", "book.xlsx", None, (Container("Q3", (P, A)), Container("预算", (Z, B))))],
            [InsertBlank("D0", (0, 0), "row"), RenameSheet("D0", 1, "决算")],
            Answer("a0", "marker", "en", (Cite("p1", 0), Cite("p2", None))),
            Answer("a1", "marker", "zh", (Cite("p5", 2), Cite("p3", 1))),
        ),
        "deck: a blank slide before the second": script(
            [
                Doc(
                    "D0",
                    "pptx",
                    "deck.pptx",
                    None,
                    (Container(None, (P,)), Container(None, (Z,)), Container(None, (A,))),
                )
            ],
            [InsertBlank("D0", (1, 0), "slide")],
            Answer("a0", "marker", "zh", (Cite("p5", None), Cite("p1", 1), Cite("p2", 2))),
        ),
        "file moved, doc_id from the sidecar": script(
            [md("D0", P, A, explicit="kb-guide", path="guide.md")], [MoveFile("D0", "moved/guide.md")]
        ),
        "file moved, doc_id follows the path": script(
            [md("D0", P, A, path="guide.md")], [MoveFile("D0", "archive/guide.md")]
        ),
        "paragraph moved to another file of another format": script(
            [md("D0", P, A), Doc("D1", "xlsx", "book.xlsx", "kb-book", (Container("Q3", (B,)),))],
            [Move("p1", "D1", (0, 0))],
        ),
        "paragraph edited, a copy in its document and one in another: relocated to the one in its document": script(
            [md("D0", P, A, P2), md("D1", B, replace(P, uid="p11"))],
            [edit(P, 1)],
            Answer("a0", "structured", "en", (Cite("p1", None), Cite("p1", 0), Cite("p1", 1), Cite("p11", 1))),
        ),
        "paragraph edited, its text verbatim in two other documents: relocated to either": script(
            [
                md("D0", P, A),
                md("D1", B, replace(P, uid="p11")),
                Doc("D2", "xlsx", "sheets.xlsx", "budget", (Container("Q3", (C, replace(P, uid="p12"))),)),
            ],
            [edit(P, 1)],
            Answer("a0", "structured", "en", (Cite("p1", None), Cite("p1", 0), Cite("p1", 1), Cite("p12", 1))),
            Answer("a1", "marker", "en", (Cite("p1", 2), Cite("p11", None))),
        ),
        "Chinese: a copy deleted, another edited (marker form)": script(
            [md("D0", Z, Y, X, Z2)],
            [Delete("p5"), edit(Y, 0)],
            Answer("a0", "marker", "zh", (Cite("p5", None), Cite("p10", 1), Cite("p6", 0), Cite("p6", 1))),
            Answer("a1", "structured", "zh", (Cite("p5", 2), Cite("p7", None))),
        ),
        "citations by document registration cannot anchor, beside citations that move": script(
            [md("D0", P, A, path="guide.md"), md("D1", Z, Y, explicit="kb-zh", path="手册.md")],
            [MoveFile("D0", "moved/guide.md"), edit(Y, 0)],
            Answer(
                "a0",
                "structured",
                "en",
                (
                    Cite("p1", 0),
                    DocCite("u1", "source_path", "moved/guide.md", P.sentences[1], "en"),  # the path only v2 has
                    DocCite("u2", "doc_id", "手册.md", Z.sentences[0], "zh"),
                ),
            ),  # a path, given as a doc_id
            Answer(
                "a1",
                "marker",
                "zh",
                (
                    Cite("p6", 1),
                    DocCite("u3", "doc_id", "kb-zh", t.sentence("ZH"), "zh"),  # quotes none of its text
                    DocCite("u4", "source_path", "guide.md", t.sentence("EN"), "en"),
                ),
            ),
            Answer("a2", "structured", "en", (DocCite("u5", "doc_id", "kb-retired", A.sentences[2], "en"),)),
        ),
    }
    staff, public = ("staff",), ("public",)
    out |= {
        "audience: a staff-only document cited for the public, for staff, for nobody, unchecked": script(
            [md("D0", P, A, groups=staff), md("D1", B, path="open.md")],
            [edit(B, 0)],
            Answer("a0", "structured", "en", (Cite("p1", 0), Cite("p3", None), Cite("p2", 1)), public),
            Answer("a1", "marker", "en", (Cite("p1", 1), Cite("p2", None)), staff),
            Answer("a2", "structured", "en", (Cite("p1", None), Cite("p3", 1)), ()),
            Answer("a3", "marker", "en", (Cite("p1", 2),)),
        ),
        "audience: one document closed since v1, another opened since (fail closed: both out_of_scope)": script(
            [md("D0", P, explicit="kb-policy"), md("D1", A, groups=staff), md("D2", Z, path="手册.md")],
            [SetGroups("D0", staff), SetGroups("D1", None), edit(Z, 1)],
            Answer("a0", "structured", "en", (Cite("p1", 0), Cite("p2", None)), public),
            Answer("a1", "marker", "zh", (Cite("p5", 0), Cite("p2", 1), Cite("p1", None)), staff),
        ),
        "audience: evidence verbatim only in a staff-only document: stale for the public": script(
            [md("D0", P, A), md("D1", B, replace(P, uid="p11"), groups=("eu", "staff"))],
            [edit(P, 1)],
            Answer("a0", "structured", "en", (Cite("p1", 1), Cite("p1", 0)), public),
            Answer("a1", "marker", "en", (Cite("p1", 1),), staff),
            Answer("a2", "structured", "en", (Cite("p1", 1),)),
        ),
        "audience: a paragraph moved into a staff-only workbook; a citation by document of it": script(
            [
                md("D0", P, A, path="guide.md"),
                Doc("D1", "xlsx", "book.xlsx", "kb-book", (Container("Q3", (B,)),), staff),
            ],
            [Move("p1", "D1", (0, 0))],
            Answer(
                "a0",
                "structured",
                "en",
                (Cite("p1", 0), Cite("p2", None), DocCite("u1", "source_path", "book.xlsx", t.sentence("EN"), "en")),
                public,
            ),
            Answer(
                "a1", "marker", "en", (Cite("p1", 1), DocCite("u2", "doc_id", "kb-book", t.sentence("EN"), "en")), staff
            ),
        ),
    }
    if BLANK_PAGES:
        out["PDF: a blank page before the second"] = script(
            [Doc("D0", "pdf", "paper.pdf", None, (Container(None, (P, A)), Container(None, (B,))))],
            [InsertBlank("D0", (1, 0), "page")],
            Answer("a0", "structured", "en", (Cite("p1", None), Cite("p3", 0))),
        )
    for name, s in out.items():
        assert not problems(s.old, s.new, s.ops), (name, problems(s.old, s.new, s.ops))
        for _, c in s.cites:
            if isinstance(c, DocCite) and (doc := named_document(s.old, c)) is not None:
                assert _closest_window(c.quote, doc.text) <= UNANCHORED_MAX_RATIO, (name, c)
    return out


# ---------------------------------------------------------------------------------------------------- oracle


@dataclass(frozen=True)
class Expected:
    """What the status row of one citation must say. Chunks are named by (doc_id, start_char) of the
    paragraph that is the chunk; the test maps them to chunk ids through the ingested chunk table."""

    status: str
    reason: str  # why, in the model's words (for the failure report)
    doc_id: str | None  # None (and no old span, no locator): a citation by document registration could not anchor
    source_path: str | None
    old_start_char: int | None
    old_end_char: int | None
    old_locator: str | None
    new_doc_id: str | None = None
    new_chunk: tuple[str, int] | None = None
    new_start_char: int | None = None
    new_end_char: int | None = None
    new_locator: str | None = None
    new_source_path: str | None = None
    new_text: str | None = None
    # Stale and removed: every verbatim place of the evidence the re-anchoring may suggest, as (doc_id,
    # start_char, end_char, chunk); empty: the evidence is verbatim nowhere (no exact suggestion possible).
    # Relocated to where the evidence was found verbatim: that one place.
    suggestions: frozenset = field(default_factory=frozenset)
    # Not anchored at registration: the document its invalid reason names (the reason starts NOT_ANCHORED).
    unanchored_name: str | None = None
    # The repair kind its citation must get (None: not checked), re-pointed to new_chunk and the new span.
    repair: str | None = None
    # The same row at the other places the re-anchoring may pick (several documents outside the preferred ones
    # hold the evidence): the product's row must be this one or one of them.
    alternatives: tuple[Expected, ...] = ()
    # What the reason must name (out_of_scope: the closed document's path, its groups and the answer's audience).
    reason_names: tuple[str, ...] = ()


def _span(placed: Placed, evidence: str) -> tuple[int, int]:
    offset = placed.para.text.index(evidence)
    return placed.start + offset, placed.start + offset + len(evidence)


def closed(groups: tuple[str, ...] | None, audience: tuple[str, ...] | None) -> bool:
    """A document open only to `groups` is closed to an answer given to `audience`: the answer names an audience,
    the document names groups, and they share none."""
    return audience is not None and bool(groups) and not set(groups) & set(audience)


def _verbatim(new: Corpus, evidence: str, prefer: list[str], audience: tuple[str, ...] | None = None) -> frozenset:
    """Where the re-anchoring finds the evidence verbatim: the first place in the first preferred document
    holding it (the successor's, then the cited one), else the first place in any other document; never in a
    document closed to the answer's audience."""
    new = tuple(doc for doc in new if not closed(doc.access_groups, audience))

    def first(doc: Doc):
        start = doc.text.find(evidence)
        if start < 0:
            return None
        chunk = next(p for p in doc.placed if p.start <= start < p.end)
        return doc.doc_id, start, start + len(evidence), (doc.doc_id, chunk.start)

    by_id = {d.doc_id: d for d in new}
    for doc_id in dict.fromkeys(prefer):
        if doc_id in by_id and (found := first(by_id[doc_id])):
            return frozenset([found])
    return frozenset(found for d in new if d.doc_id not in prefer and (found := first(d)))


def _placed_at(corpus: Corpus, chunk: tuple[str, int]) -> Placed:
    doc_id, start = chunk
    return next(p for doc in corpus if doc.doc_id == doc_id for p in doc.placed if p.start == start)


def _found_verbatim(new: Corpus, places: frozenset, uid: str, base: dict) -> Expected:
    """Its successor lost the evidence, the re-anchoring found it verbatim at `places` (one of which it picks):
    relocated there, and repaired by re-pointing it there (each paragraph is one chunk, so the span fits it)."""

    def at(place: tuple) -> Expected:
        doc_id, start, end, chunk = place
        placed = _placed_at(new, chunk)
        return Expected(
            "relocated",
            f"{uid} edited, evidence gone from it, verbatim at {placed.doc.path} chars {start}-{end}",
            **base,
            new_doc_id=doc_id,
            new_chunk=chunk,
            new_start_char=start,
            new_end_char=end,
            new_locator=placed.locator,
            new_source_path=placed.doc.path,
            new_text=placed.para.text,
            suggestions=frozenset([place]),
            repair="repointed_successor",
        )

    first, *others = [at(place) for place in sorted(places, key=lambda place: place[:3])]
    return replace(first, alternatives=tuple(others))


def expected_unanchored(old: Corpus, cite: DocCite) -> Expected:
    """Registration found no chunk for it: invalid, with no chunk, document or span of v1."""
    why = "v1 has no such document" if named_document(old, cite) is None else "its quote is in no text of it"
    return Expected(
        "invalid",
        f"{cite.by} {cite.name!r}: {why}",
        doc_id=None,
        source_path=None,
        old_start_char=None,
        old_end_char=None,
        old_locator=None,
        unanchored_name=cite.name,
    )


def _by_doc_id(corpus: Corpus, doc_id: str | None) -> Doc | None:
    return next((doc for doc in corpus if doc.doc_id == doc_id), None)


def _named_doc_id(script: EditScript, cite: DocCite) -> str | None:
    """The doc_id a citation by document names: its doc_id, or the one of the document at its path in v1, else in v2."""
    if cite.by == "doc_id":
        return cite.name
    return next((doc.doc_id for corpus in (script.old, script.new) for doc in corpus if doc.path == cite.name), None)


def outside(script: EditScript, cite: AnyCite, audience: tuple[str, ...] | None) -> Doc | None:
    """The document that makes the citation out_of_scope (None: it is not): the document it cites, in v1 or in v2
    (by its doc_id), or the v2 document its paragraph now sits in, closed to the answer's audience."""
    if isinstance(cite, DocCite):
        doc_id = _named_doc_id(script, cite)
        places = [_by_doc_id(script.old, doc_id), _by_doc_id(script.new, doc_id)]
    else:
        cited = locate(script.old, cite.uid).doc
        now = locate(script.new, cite.uid)
        places = [cited, _by_doc_id(script.new, cited.doc_id), now and now.doc]
    return next((doc for doc in places if doc is not None and closed(doc.access_groups, audience)), None)


def expected_status(script: EditScript, cite: AnyCite, audience: tuple[str, ...] | None = None) -> Expected:
    if (door := outside(script, cite, audience)) is not None:
        return expected_out_of_scope(script, cite, door, audience)
    if isinstance(cite, DocCite):
        return expected_unanchored(script.old, cite)
    old_place = locate(script.old, cite.uid)
    quote = quote_text(script.old, cite)
    evidence = quote if quote is not None else old_place.para.text
    old_start, old_end = _span(old_place, evidence)
    base = dict(
        doc_id=old_place.doc.doc_id,
        source_path=old_place.doc.path,
        old_start_char=old_start,
        old_end_char=old_end,
        old_locator=old_place.locator,
    )
    now = locate(script.new, cite.uid)
    if now is None:
        return Expected(
            "removed",
            f"{cite.uid} was deleted",
            **base,
            suggestions=_verbatim(script.new, evidence, [old_place.doc.doc_id], audience),
        )
    successor = dict(
        new_doc_id=now.doc.doc_id,
        new_chunk=(now.doc.doc_id, now.start),
        new_locator=now.locator,
        new_source_path=now.doc.path,
        new_text=now.para.text,
    )
    if now.para.text == old_place.para.text:
        start, end = _span(now, evidence)
        moved = [
            what
            for what, before, after in (
                ("document", old_place.doc.doc_id, now.doc.doc_id),
                # A chunk_id numbers the copies of its text in its document: the second copy becomes the
                # first when the first goes (the citation must then name the new id).
                ("chunk id (copy number)", old_place.occurrence, now.occurrence),
                ("offsets", (old_place.start, old_place.end), (now.start, now.end)),
                ("native locator", old_place.locator, now.locator),
                ("source_path", old_place.doc.path, now.doc.path),
            )
            if before != after
        ]
        status = "relocated" if moved else "valid"
        reason = f"same text; changed: {', '.join(moved)}" if moved else "same text, same locator"
        return Expected(status, reason, **base, **successor, new_start_char=start, new_end_char=end)
    if evidence in now.para.text:
        start, end = _span(now, evidence)
        return Expected(
            "drifted",
            f"{cite.uid} edited, evidence still in it",
            **base,
            **successor,
            new_start_char=start,
            new_end_char=end,
        )
    if places := _verbatim(script.new, evidence, [now.doc.doc_id, old_place.doc.doc_id], audience):
        return _found_verbatim(script.new, places, cite.uid, base)
    return Expected(
        "stale",
        f"{cite.uid} edited, evidence gone from it and verbatim nowhere",
        **base,
        **successor,
        new_start_char=now.start,
        new_end_char=now.end,
    )


def expected_out_of_scope(script: EditScript, cite: AnyCite, door: Doc, audience: tuple[str, ...]) -> Expected:
    """Closed to the answer's audience: out_of_scope, its old locator as any row's (none for a citation registration
    could not anchor), nothing after it followed, never repaired."""
    reason = f"{door.path} is open only to {list(door.access_groups)}, not to the audience {list(audience)}"
    names = (door.path, _listed(door.access_groups), _listed(audience))
    if isinstance(cite, DocCite):
        return replace(
            expected_unanchored(script.old, cite),
            status="out_of_scope",
            reason=reason,
            unanchored_name=None,
            repair="out_of_scope",
            reason_names=names,
        )
    old_place = locate(script.old, cite.uid)
    quote = quote_text(script.old, cite)
    start, end = _span(old_place, quote if quote is not None else old_place.para.text)
    return Expected(
        "out_of_scope",
        reason,
        doc_id=old_place.doc.doc_id,
        source_path=old_place.doc.path,
        old_start_char=start,
        old_end_char=end,
        old_locator=old_place.locator,
        repair="out_of_scope",
        reason_names=names,
    )


def _listed(names: tuple[str, ...]) -> str:
    """Groups as a reason lists them: sorted, each once, in brackets."""
    return f"[{', '.join(sorted(set(names)))}]"


def expected_rows(script: EditScript) -> dict[tuple[str, str, str | None], Expected]:
    """(answer_id, cited paragraph uid, quote) -> the row its citation must get."""
    return {
        (a.answer_id, c.uid, quote_text(script.old, c)): expected_status(script, c, a.audience) for a, c in script.cites
    }


# ---------------------------------------------------------------------------------------------------- files

_RENDERED: dict[tuple, bytes] = {}  # the bytes of every document content written so far (rendering is slow-ish)
_FIXED_TIME = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


def write_corpus(corpus: Corpus, root: Path) -> None:
    for doc in corpus:
        path = root / doc.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(render(doc))
        sidecar = {
            "doc_id": doc.explicit_id,
            "access_groups": None if doc.access_groups is None else list(doc.access_groups),
        }
        sidecar = {key: value for key, value in sidecar.items() if value is not None}
        if sidecar:
            Path(f"{path}{SIDECAR_SUFFIX}").write_text(json.dumps(sidecar))


def render(doc: Doc) -> bytes:
    key = (doc.fmt, tuple((c.name, tuple(None if p is None else p.text for p in c.slots)) for c in doc.containers))
    if key not in _RENDERED:
        _RENDERED[key] = {"md": _markdown, "xlsx": _xlsx, "pdf": _pdf, "pptx": _pptx}[doc.fmt](doc)
    return _RENDERED[key]


def _markdown(doc: Doc) -> bytes:
    return (SEPARATOR.join(p.text for p in doc.paragraphs) + "\n").encode()


def _xlsx(doc: Doc) -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.properties.created = workbook.properties.modified = _FIXED_TIME.replace(tzinfo=None)
    for i, container in enumerate(doc.containers):
        sheet = workbook.active if i == 0 else workbook.create_sheet()
        sheet.title = container.name
        for row, para in enumerate(container.slots, start=1):
            if para is not None:
                sheet.cell(row=row, column=1, value=para.text)
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def _pdf(doc: Doc) -> bytes:
    """One line per paragraph on a wide, low page (a blank page is OCR'd: fewer pixels, less time)."""
    from fpdf import FPDF

    pdf = FPDF(unit="mm", format=(400, 64))
    pdf.set_creation_date(_FIXED_TIME)
    pdf.set_auto_page_break(False)
    if CJK_FONT:
        pdf.add_font("cjk", fname=CJK_FONT)
        pdf.set_font("cjk", size=6)
    else:
        pdf.set_font("helvetica", size=6)
    for container in doc.containers:
        pdf.add_page()
        for line, para in enumerate(container.slots):
            pdf.set_xy(6, 8 + 18 * line)
            pdf.cell(text=para.text)
    return bytes(pdf.output())


def _pptx(doc: Doc) -> bytes:
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    deck.core_properties.created = deck.core_properties.modified = _FIXED_TIME.replace(tzinfo=None)
    for container in doc.containers:
        slide = deck.slides.add_slide(deck.slide_layouts[6])  # Blank: no title placeholder
        for para in container.slots:
            box = slide.shapes.add_textbox(Inches(0.5), Inches(0.5), Inches(9), Inches(3))
            box.text_frame.word_wrap = True
            box.text_frame.text = para.text
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()
