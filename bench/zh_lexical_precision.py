"""Precision of the lexical fast path (tier 2) on Chinese: the zh-CN Vue docs, through the real engine.

Positives (gold: supported): prose sentences kept verbatim in the same file between the 2024-06-01 and
2026-07-01 revisions, each a claim citing its paragraph in the newer revision; and near-verbatim rewrites of
them that keep their meaning (a leading connective dropped, 非常 "very" dropped, a numeral written in
digits). Negatives (gold: not supported): the same sentences perturbed (a negation inserted or removed, a hedge
inserted, a number changed, a Latin identifier or a Chinese noun swapped for another from the corpus), citing the
original paragraph. Sampling is seeded. The engine runs without a model, so a claim is decided only when
every sentence is near-verbatim in its evidence (status `supported`, tier `lexical`).
precision = decided positives / decided claims; coverage = decided positives / positives. Target: precision
>= 0.95.

    .venv/bin/python bench/zh_lexical_precision.py [path/to/vue-docs-zh]
"""

from __future__ import annotations

import logging
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path

import jieba
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.lexical_fastpath import lexically_supported
from citekeeper.text import sentence_spans
from tests.eval_data import VUE_DOCS_ZH
from verifiers.lexical import STOPWORDS

jieba.setLogLevel(logging.WARNING)  # its dictionary load logs at INFO

OLD, NEW = "2024-06-01", "2026-07-01"
TARGET = 0.95
SEED = 20260701
N_KEPT = 300
N_PER_REWRITE = 100
MIN_HAN = 12  # a prose sentence: at least this many Han characters

_FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.M | re.S)  # code blocks are not prose
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n")
# A Latin word (ASCII boundaries: \b would not separate it from Han characters); the pool of swaps keeps
# code spans (`ref`) and capitalised names (Vite), not the English words the docs also quote.
_WORD = r"(?<![A-Za-z0-9_.$-])[A-Za-z][A-Za-z0-9_]+(?![A-Za-z0-9_])"
_IDENTIFIER = re.compile(rf"`({_WORD})`|(?<![A-Za-z0-9_])([A-Z][A-Za-z0-9_]+)(?![A-Za-z0-9_])")
_NUMBER = re.compile(r"\d+")
# Verbs a 不 negates, and negations that can be dropped (the rest of the word stays).
_NEGATABLE = frozenset("是 可以 会 能 能够 支持 需要 应该 允许 包含 提供 使用 适用 推荐 必须".split())
_NEGATIONS = {"不": "", "没有": "有", "无法": "能", "无需": "需要"}
_NEXT_NUMERAL = {**dict(zip("一两二三四五六七八九", "两三三四五六七八九十", strict=True)), "十": "二十"}
_DIGIT = dict(zip("一两二三四五六七八九", "1223456789", strict=True))
_MEASURE = "个种次件条项步层套组份"
_NUMERAL_WORD = re.compile(f"[一两二三四五六七八九十]+[{_MEASURE}]")
_DIGIT_WORD = re.compile(f"[一两二三四五六七八九][{_MEASURE}]")
_CONNECTIVE = re.compile(
    r"^((?:[-*]|\d+\.)\s+)?(?:例如|比如|因此|所以|此外|另外|同时|实际上|事实上|当然|首先|其次|然后|总之|换句话说|也就是说)[，,]\s*"
)
# Frequent nouns of the Vue docs; a swap replaces one with another.
NOUNS = tuple(
    (
        "组件 函数 类型 元素 属性 对象 模板 选项 状态 事件 实例 参数 "
        "文件 插槽 指令 钩子 数组 字符串 浏览器 侦听器 路由 插件 变量 服务器"
    ).split()
)


Rewrite = Callable[[str, random.Random], str | None]


def read_sentences(root: Path, revision: str) -> pl.DataFrame:
    """(path, sentence, paragraph) for every sentence of every markdown file of one revision."""
    rows = []
    for file in sorted((root / revision).rglob("*.md")):
        text = _FENCE.sub("", file.read_text(encoding="utf-8"))
        for paragraph in _PARAGRAPH_BREAK.split(text):
            for start, end in sentence_spans(paragraph):
                rows.append((str(file.relative_to(root / revision)), paragraph[start:end], paragraph.strip()))
    return pl.DataFrame(rows, schema=["path", "sentence", "paragraph"], orient="row")


def kept_sentences(root: Path) -> pl.DataFrame:
    """Prose sentences of NEW also present verbatim in the same file of OLD, one row per distinct sentence."""
    old = read_sentences(root, OLD).select("path", "sentence")
    return (
        read_sentences(root, NEW)
        .join(old, on=["path", "sentence"], how="semi")
        .filter(
            pl.col("sentence").str.count_matches(r"\p{Han}") >= MIN_HAN,
            ~pl.col("sentence").str.contains(r"^(?:[#|<:>]|\[!)|\{#"),  # headings, tables, html, containers
        )
        .unique("sentence", keep="first", maintain_order=True)
    )


def _words(sentence: str) -> list[str]:
    return jieba.lcut(sentence, HMM=False)


def drop_connective(sentence: str, rng: random.Random) -> str | None:
    """因此，X -> X: the sentence still asserts X."""
    dropped = _CONNECTIVE.sub(lambda m: m.group(1) or "", sentence, count=1)
    return dropped if dropped != sentence else None


def drop_very(sentence: str, rng: random.Random) -> str | None:
    """X 非常 Y -> X Y: weaker, still supported; 非常 must not count as a negation."""
    return sentence.replace("非常", "", 1) if "非常" in sentence else None


def numeral_in_digits(sentence: str, rng: random.Random) -> str | None:
    """两个 -> 2 个: the same number written in digits."""
    words = _words(sentence)
    at = next((i for i, word in enumerate(words) if _DIGIT_WORD.fullmatch(word)), None)
    if at is None:
        return None
    words[at] = f"{_DIGIT[words[at][0]]} {words[at][1]}"
    return "".join(words)


def insert_negation(sentence: str, rng: random.Random) -> str | None:
    return _before_verb(sentence, "不")


def insert_hedge(sentence: str, rng: random.Random) -> str | None:
    """X 会 Y -> X 可能会 Y: a certain statement made uncertain."""
    return _before_verb(sentence, "可能")


def _before_verb(sentence: str, prefix: str) -> str | None:
    """`prefix` put before the first verb a negation could take (not one already negated)."""
    words = _words(sentence)
    at = next(
        (i for i, word in enumerate(words) if word in _NEGATABLE and not (i and words[i - 1][-1] in "不没未无非")), None
    )
    if at is None:
        return None
    words[at] = prefix + words[at]
    return "".join(words)


def remove_negation(sentence: str, rng: random.Random) -> str | None:
    words = _words(sentence)
    negation = (
        i for i, word in enumerate(words) if word in _NEGATIONS or (word.startswith("不") and word[1:] in _NEGATABLE)
    )
    at = next(negation, None)
    if at is None:
        return None
    words[at] = _NEGATIONS.get(words[at], words[at][1:])
    return "".join(words)


def change_number(sentence: str, rng: random.Random) -> str | None:
    if _NUMBER.search(sentence):
        return _NUMBER.sub(lambda m: str(int(m.group()) + 1 + rng.randrange(9)), sentence, count=1)
    numeral = _NUMERAL_WORD.search(sentence)
    if numeral is None:
        return None
    return sentence[: numeral.start()] + _NEXT_NUMERAL[numeral.group()[0]] + sentence[numeral.start() + 1 :]


def swap_identifier(sentence: str, rng: random.Random, pool: tuple[str, ...]) -> str | None:
    names = [m for m in re.finditer(_WORD, sentence) if m.group() in pool]
    if not names:
        return None
    name = rng.choice(names)
    other = rng.choice([p for p in pool if p.lower() != name.group().lower()])
    return sentence[: name.start()] + other + sentence[name.end() :]


def swap_noun(sentence: str, rng: random.Random) -> str | None:
    words = _words(sentence)
    at = [i for i, word in enumerate(words) if word in NOUNS]
    if not at:
        return None
    chosen = rng.choice(at)
    words[chosen] = rng.choice([noun for noun in NOUNS if noun != words[chosen]])
    return "".join(words)


def identifier_pool(kept: pl.DataFrame) -> tuple[str, ...]:
    """Identifiers used at least three times in the kept sentences (ref, computed, Vite, ...), less the
    English function words the lexical tier ignores by design (`in`, `this`)."""
    names = pl.Series("name", [a or b for a, b in _IDENTIFIER.findall("\n".join(kept["sentence"]))], pl.String)
    function_word = pl.col("name").str.to_lowercase().is_in(list(STOPWORDS))
    counts = names.value_counts().filter(pl.col("count") >= 3, ~function_word)
    return tuple(counts.sort("name")["name"])


def rewrites(pool: tuple[str, ...]) -> dict[str, tuple[bool, Rewrite]]:
    """kind -> (gold supported, rewrite of a kept sentence or None where it does not apply)."""
    return {
        "connective_dropped": (True, drop_connective),
        "very_dropped": (True, drop_very),
        "numeral_in_digits": (True, numeral_in_digits),
        "negation_inserted": (False, insert_negation),
        "negation_removed": (False, remove_negation),
        "hedge_inserted": (False, insert_hedge),
        "number_changed": (False, change_number),
        "identifier_swapped": (False, lambda sentence, rng: swap_identifier(sentence, rng, pool)),
        "noun_swapped": (False, swap_noun),
    }


def claims_and_evidence(root: Path) -> pl.DataFrame:
    """(kind, gold, claim, evidence): sampled kept sentences and their rewrites, each citing its paragraph."""
    kept = kept_sentences(root).sample(seed=SEED, fraction=1.0, shuffle=True)
    frames = [
        kept.head(N_KEPT).select(
            pl.lit("kept").alias("kind"),
            pl.lit(True).alias("gold"),
            pl.col("sentence").alias("claim"),
            pl.col("paragraph").alias("evidence"),
        )
    ]
    for kind, (gold, rewrite) in rewrites(identifier_pool(kept)).items():
        rng = random.Random(f"{SEED}-{kind}")
        rewritten = kept.select(
            pl.lit(kind).alias("kind"),
            pl.lit(gold).alias("gold"),
            pl.Series("claim", [rewrite(sentence, rng) for sentence in kept["sentence"]], pl.String),
            pl.col("paragraph").alias("evidence"),
            "sentence",
        ).filter(pl.col("claim").is_not_null() & (pl.col("claim") != pl.col("sentence")))
        frames.append(rewritten.head(N_PER_REWRITE).drop("sentence"))
    return pl.concat(frames).with_row_index("row")


def main(root: Path = VUE_DOCS_ZH) -> dict:
    cases = claims_and_evidence(root).with_columns(pl.format("zh-{}", "row").alias("claim_id"))
    decided_ids = lexically_supported(cases, "vue-docs-zh")
    by_kind = (
        cases.with_columns(pl.col("claim_id").is_in(decided_ids.implode()).alias("decided"))
        .group_by("kind", "gold", maintain_order=True)
        .agg(pl.len().alias("n"), pl.col("decided").sum())
    )
    totals = by_kind.group_by("gold").agg(pl.col("n", "decided").sum())
    positives, correct = totals.filter(pl.col("gold")).select("n", "decided").row(0)
    negatives, wrong = totals.filter(~pl.col("gold")).select("n", "decided").row(0)
    precision = correct / (correct + wrong) if correct + wrong else None
    figures = {
        "n": positives + negatives,
        "positives": positives,
        "negatives": negatives,
        "decided": correct + wrong,
        "correct": correct,
        "precision": precision,
        "coverage": correct / positives,
        "by_kind": {kind: (decided, n) for kind, _, n, decided in by_kind.iter_rows()},
    }
    print(
        f"Vue docs zh lexical fast path: n={figures['n']} positives={positives} negatives={negatives} "
        f"decided={figures['decided']} correct={correct}"
    )
    print(
        f"precision={'n/a' if precision is None else f'{precision:.3f}'} (target >= {TARGET}) "
        f"coverage={figures['coverage']:.3f} ({correct}/{positives} positives decided without a model)"
    )
    for gold, label in ((True, "positives decided"), (False, "negatives wrongly passed")):
        kinds = by_kind.filter(pl.col("gold") == gold).iter_rows(named=True)
        print(f"{label}: " + ", ".join(f"{row['kind']} {row['decided']}/{row['n']}" for row in kinds))
    return figures


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else VUE_DOCS_ZH)
