"""A tiny BERT classifier, its tokenizer and a sentiment set, built here (nothing downloaded), and a Trainer on them."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import datasets
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast, Trainer, TrainingArguments

WORDS = ["the", "a", "film", "plot", "was", "very", "good", "great", "bad", "dull"]
VOCAB = {token: i for i, token in enumerate(["[PAD]", "[UNK]", *WORDS])}


def tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]")


def sentiment(n: int, seed: int = 0) -> datasets.Dataset:
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(WORDS) for _ in range(6)) for _ in range(n)]
    labels = [int("good" in text or "great" in text) for text in texts]
    tok = tokenizer()
    raw = datasets.Dataset.from_dict({"text": texts, "label": labels})
    return raw.map(lambda b: tok(b["text"], padding="max_length", max_length=8), batched=True, keep_in_memory=True)


def bert() -> BertForSequenceClassification:
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
        hidden_dropout_prob=0.1,
    )
    return BertForSequenceClassification(config)


def arguments(out: Path, **overrides: Any) -> TrainingArguments:
    settings: dict[str, Any] = dict(
        output_dir=str(out),
        num_train_epochs=2,
        per_device_train_batch_size=16,
        logging_steps=1,
        eval_strategy="epoch",
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        report_to="none",
        seed=3,
    )
    settings.update(overrides)
    return TrainingArguments(**settings)


def trainer(
    out: Path, callbacks: list[Any], *, model: Any = None, n_train: int = 64, cls: type = Trainer, **overrides: Any
) -> Trainer:
    """A Trainer of 4 steps an epoch (64 samples in batches of 16) evaluated at each epoch's end on 16 samples."""
    return cls(
        model=model if model is not None else bert(),
        args=arguments(out / "trainer_output", **overrides),
        train_dataset=sentiment(n_train),
        eval_dataset=sentiment(16, seed=1),
        callbacks=callbacks,
    )
