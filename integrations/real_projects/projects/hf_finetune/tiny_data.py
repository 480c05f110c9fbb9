"""A small sentiment task, its tokenizer and a tiny model, all built here: nothing is downloaded."""

from __future__ import annotations

import random

import datasets
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification, PreTrainedTokenizerFast

WORDS = [
    *("the", "a", "this", "that", "film", "movie", "plot", "actor", "scene", "was", "is", "very", "quite"),
    *("good", "great", "superb", "bad", "awful", "dull"),
]
POSITIVE = {"good", "great", "superb"}
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[BOS]", "[EOS]"]


def tokenizer() -> PreTrainedTokenizerFast:
    vocab = {token: i for i, token in enumerate(SPECIAL + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        bos_token="[BOS]",
        eos_token="[EOS]",
    )


def sentences(n: int, seed: int = 0) -> dict[str, list]:
    rng = random.Random(seed)  # the data is fixed: only the training's seeds vary
    texts = [" ".join(rng.choice(WORDS) for _ in range(8)) for _ in range(n)]
    return {"text": texts, "label": [int(any(word in POSITIVE for word in text.split())) for text in texts]}


def dataset(n: int, max_length: int, seed: int = 0) -> datasets.Dataset:
    tok = tokenizer()
    raw = datasets.Dataset.from_dict(sentences(n, seed))
    return raw.map(
        lambda batch: tok(batch["text"], padding="max_length", max_length=max_length, truncation=True), batched=True
    )


def classifier(model_type: str, hidden: int, layers: int):
    config = AutoConfig.for_model(
        model_type,
        vocab_size=len(SPECIAL) + len(WORDS),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=32,
        num_labels=2,
        pad_token_id=0,
        **({"n_embd": hidden, "n_layer": layers, "n_head": 2, "n_positions": 32} if model_type == "gpt2" else {}),
    )
    return AutoModelForSequenceClassification.from_config(config)


def causal_lm(hidden: int, layers: int):
    config = AutoConfig.for_model(
        "llama",
        vocab_size=len(SPECIAL) + len(WORDS),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=32,
        pad_token_id=0,
        bos_token_id=4,
        eos_token_id=5,
    )
    return AutoModelForCausalLM.from_config(config)
