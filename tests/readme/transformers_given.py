"""What the README's Hugging Face quickstart takes as given: a ``model`` and ``train``/``val`` datasets.

tests/test_readme_blocks.py runs this file before a ```python block marked
``<!-- readme-check: given tests/readme/transformers_given.py (...) -->``: a 1-layer BERT built from its config and a
small sentiment set tokenised by a word-level tokenizer built here (nothing downloaded), trained by the snippet itself.
"""

from __future__ import annotations

import random

import datasets
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

__all__ = ["model", "train", "val"]

_words = ["the", "a", "film", "plot", "was", "very", "good", "great", "bad", "dull"]
_vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", *_words])}
_tokens = Tokenizer(models.WordLevel(_vocab, unk_token="[UNK]"))
_tokens.pre_tokenizer = pre_tokenizers.Whitespace()
_tokenizer = PreTrainedTokenizerFast(tokenizer_object=_tokens, pad_token="[PAD]", unk_token="[UNK]")


def _sentiment(n: int, seed: int) -> datasets.Dataset:
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(_words) for _ in range(6)) for _ in range(n)]
    labels = [int("good" in text or "great" in text) for text in texts]
    raw = datasets.Dataset.from_dict({"text": texts, "label": labels})
    return raw.map(lambda b: _tokenizer(b["text"], padding="max_length", max_length=8), batched=True)


model = BertForSequenceClassification(
    BertConfig(vocab_size=len(_vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=32, max_position_embeddings=16, num_labels=2)
)  # fmt: skip
train, val = _sentiment(32, seed=0), _sentiment(16, seed=1)
