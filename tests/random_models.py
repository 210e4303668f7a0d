"""Random-weight NLI models built offline, for tests, benchmarks and smoke runs without downloadable weights.

The tokenizer is a WordPiece vocabulary trained on the given texts with the `tokenizers` library and wrapped
as a PreTrainedTokenizerFast, so `AutoTokenizer` / `AutoModelForSequenceClassification` load the directory
exactly as they would a real NLI model. The verdicts of such a model are meaningless; its shapes, label
handling and speed are real.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

# cross-encoder/nli-deberta-v3-xsmall: the published config of the default model, minus the weights.
DEBERTA_V3_XSMALL = dict(
    vocab_size=128100,
    hidden_size=384,
    num_hidden_layers=12,
    num_attention_heads=6,
    intermediate_size=1536,
    hidden_act="gelu",
    max_position_embeddings=512,
    type_vocab_size=0,
    relative_attention=True,
    position_buckets=256,
    norm_rel_ebd="layer_norm",
    share_att_key=True,
    pos_att_type=["p2c", "c2p"],
    position_biased_input=False,
    max_relative_positions=-1,
    layer_norm_eps=1e-7,
    pooler_hidden_size=384,
    pooler_dropout=0,
    pooler_hidden_act="gelu",
)
DEBERTA_V3 = {  # the real shapes of DeBERTa-v3 xsmall (the default model's) and base
    "deberta-v3-xsmall": DEBERTA_V3_XSMALL,
    "deberta-v3-base": {
        **DEBERTA_V3_XSMALL,
        "hidden_size": 768,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "pooler_hidden_size": 768,
    },
}
CROSS_ENCODER_LABELS = {0: "contradiction", 1: "entailment", 2: "neutral"}
TINY_BERT = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=128,
)


SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def wordpiece_vocab(texts: list[str], vocab_size: int) -> dict[str, int]:
    """Specials, every character (alone and as a ##continuation), then the most frequent words.

    Built by counting rather than with the `tokenizers` trainer, whose ties break differently from run to
    run: the same texts must give the same token ids, or a seeded random model gives different verdicts.
    """
    words = Counter(word for text in texts for word in re.findall(r"\w+|[^\w\s]", text.lower()))
    chars = sorted({char for word in words for char in word})
    frequent = sorted(words, key=lambda word: (-words[word], word))
    pieces = dict.fromkeys([*SPECIAL_TOKENS, *chars, *("##" + c for c in chars)])
    for word in frequent:
        if len(pieces) >= vocab_size:
            break
        pieces.setdefault(word)
    return {piece: index for index, piece in enumerate(pieces)}


def build_tokenizer(texts: list[str], vocab_size: int = 2000, model_max_length: int = 512):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordPiece(wordpiece_vocab(texts, vocab_size), unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=model_max_length,
    )


def save_random_nli_model(
    directory: Path | str,
    texts: list[str],
    id2label: dict[int, str] | None = None,
    architecture: str = "bert",
    seed: int = 0,
    favour_label: str | None = None,
) -> Path:
    """Save a random-weight sequence-classification model + tokenizer to `directory`; returns it.

    architecture "bert": a tiny BERT (fast, for tests); "deberta-v3-xsmall" (the default model's) or
    "deberta-v3-base": the real shapes.
    favour_label: raise the classifier bias of that label so it wins on every input (a known verdict that
    only comes out right if the label order is read correctly).
    """
    import torch
    from transformers import AutoModelForSequenceClassification, BertConfig, DebertaV2Config

    id2label = id2label or CROSS_ENCODER_LABELS
    labels = dict(id2label=id2label, label2id={v: k for k, v in id2label.items()}, num_labels=len(id2label))
    if architecture == "bert":
        tokenizer = build_tokenizer(texts, vocab_size=500, model_max_length=TINY_BERT["max_position_embeddings"])
        config = BertConfig(vocab_size=len(tokenizer), **TINY_BERT, **labels)
    elif architecture in DEBERTA_V3:
        tokenizer = build_tokenizer(texts, vocab_size=8000, model_max_length=512)
        config = DebertaV2Config(**DEBERTA_V3[architecture], **labels)
    else:
        raise ValueError(f"unknown architecture {architecture!r}")
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config)
    if favour_label is not None:
        with torch.no_grad():
            model.classifier.bias[config.label2id[favour_label]] += 8.0
    directory = Path(directory)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


# ------------------------------------------ the fact-checker shapes (verifiers.checkers: binary, seq2seq, causal_lm)

CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)  # Qwen2's chat format
CHECKER_WORDS = ["Yes", "No", "0", "1", "predict", "Document", "Claim"]  # what the protocols' prompts and verdicts need


CHECKER_SIZES = {  # "tiny" for tests; "bench": 6 layers of 384, so forward passes weigh as a small real model's
    "tiny": dict(hidden=32, layers=2, heads=2, ffn=64),
    "bench": dict(hidden=384, layers=6, heads=6, ffn=1536),
    # the published shapes (bench/gpu_check.py): MiniCheck-RoBERTa-Large, MiniCheck-Flan-T5-Large, and Qwen2-0.5B for
    # the causal protocol (Bespoke-MiniCheck-7B is a Qwen2-7B: hidden 3584, 28 layers)
    "roberta-large": dict(hidden=1024, layers=24, heads=16, ffn=4096),
    "flan-t5-large": dict(hidden=1024, layers=24, heads=16, ffn=2816),
    "qwen2-0.5b": dict(hidden=896, layers=24, heads=14, ffn=4864, kv_heads=2),
}


def save_random_checker(
    directory: Path | str,
    texts: list[str],
    shape: str,
    seed: int = 0,
    max_positions: int = 128,
    vocabulary: list[str] = CHECKER_WORDS,
    size: str = "tiny",
) -> Path:
    """A random-weight fact-checker of `shape` with a tokenizer trained on `texts` plus `vocabulary`:
    "roberta" or "deberta" (a binary classifier with the generic labels LABEL_0 / LABEL_1, as MiniCheck's are
    published), "t5" (a seq2seq model, as MiniCheck-Flan-T5), "qwen2" (a causal LM with a ChatML chat template, as
    Bespoke-MiniCheck-7B). `max_positions` is the window (T5 has no positions: its tokenizer's limit)."""
    import torch
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForSeq2SeqLM,
        AutoModelForSequenceClassification,
        DebertaV2Config,
        Qwen2Config,
        RobertaConfig,
        T5Config,
    )

    tokenizer = build_tokenizer(
        [*texts, " ".join(vocabulary)], vocab_size=600 if size == "tiny" else 8000, model_max_length=max_positions
    )
    tokenizer.eos_token = "[SEP]"
    dims = CHECKER_SIZES[size]
    encoder = dict(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        hidden_size=dims["hidden"],
        num_hidden_layers=dims["layers"],
        num_attention_heads=dims["heads"],
        intermediate_size=dims["ffn"],
    )
    if shape == "roberta":  # RoBERTa numbers positions from pad_token_id + 1
        config = RobertaConfig(**encoder, max_position_embeddings=max_positions + 2, num_labels=2)
        load = AutoModelForSequenceClassification
    elif shape == "deberta":
        config = DebertaV2Config(**encoder, max_position_embeddings=max_positions, num_labels=2, type_vocab_size=0)
        load = AutoModelForSequenceClassification
    elif shape == "t5":
        config = T5Config(
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            d_model=dims["hidden"],
            d_kv=dims["hidden"] // dims["heads"],
            d_ff=dims["ffn"],
            num_layers=dims["layers"],
            num_heads=dims["heads"],
            decoder_start_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.convert_tokens_to_ids("[SEP]"),
        )
        load = AutoModelForSeq2SeqLM
    elif shape == "qwen2":  # transformers loads a qwen2 directory's tokenizer as Qwen2Tokenizer: byte-level BPE
        from verifiers.checkers.causal_lm import MINICHECK_SYSTEM_PROMPT, MINICHECK_USER_PROMPT

        prompts = [
            MINICHECK_SYSTEM_PROMPT,
            MINICHECK_USER_PROMPT,
            *[" ".join(vocabulary)] * 50,
        ]  # its own tokens, whatever `texts`
        tokenizer = qwen2_tokenizer([*texts, *prompts], max_positions, vocab_size=800 if size == "tiny" else 4000)
        config = Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=dims["hidden"],
            intermediate_size=dims["ffn"],
            num_hidden_layers=dims["layers"],
            num_attention_heads=dims["heads"],
            num_key_value_heads=dims.get("kv_heads", max(1, dims["heads"] // 2)),
            max_position_embeddings=max_positions,
            pad_token_id=tokenizer.pad_token_id,
            tie_word_embeddings=True,
        )
        load = AutoModelForCausalLM
    else:
        raise ValueError(f"unknown checker shape {shape!r}")
    torch.manual_seed(seed)
    model = load.from_config(config)
    directory = Path(directory)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def qwen2_tokenizer(texts: list[str], model_max_length: int, vocab_size: int = 800):
    """A Qwen2Tokenizer (byte-level BPE) trained on `texts`, with Qwen2's special tokens and ChatML template."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator([text for text in texts for _ in range(20)], trainer)
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    tokenizer = Qwen2Tokenizer(vocab=model["vocab"], merges=merges, model_max_length=model_max_length)
    tokenizer.add_special_tokens({"additional_special_tokens": specials[1:]})
    tokenizer.chat_template = CHATML
    return tokenizer
