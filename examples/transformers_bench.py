"""A ``deviate bench --trainer`` step factory for a Hugging Face model: what ``full_determinism`` costs a Trainer step.

``TrainingArguments(full_determinism=True)`` turns on torch's deterministic algorithms and cuDNN's determinism (and
sets ``CUBLAS_WORKSPACE_CONFIG``); ``deviate bench`` turns the same switches off and on between windows of calls to
``step``, here one step of a ``transformers.Trainer`` (its ``compute_loss``, the backward pass, its optimizer's step)
on a BERT built from its config (4 layers, hidden 256, sequences of 128 tokens; nothing downloaded):

    deviate bench --trainer examples/transformers_bench.py:trainer_step --windows 6 --steps-per-window 10

Example:
    >>> model, step = trainer_step(device="cpu", batch_size=2, layers=1, hidden=32, length=16)  # doctest: +SKIP
    >>> step()  # doctest: +SKIP
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any


def trainer_step(
    device: str = "cpu", batch_size: int = 16, *, layers: int = 4, hidden: int = 256, length: int = 128
) -> tuple[Any, Callable[[], None]]:
    """A Trainer's step (``compute_loss``, backward, AdamW as the Trainer makes it) on a fixed random batch."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                        intermediate_size=4 * hidden, max_position_embeddings=512, num_labels=2)  # fmt: skip
    model = BertForSequenceClassification(config).to(device)
    args = TrainingArguments(tempfile.mkdtemp(), use_cpu=device == "cpu", report_to="none", disable_tqdm=True)
    trainer = Trainer(model=model, args=args)
    trainer.create_optimizer()
    optimizer = trainer.optimizer
    batch = {
        "input_ids": torch.randint(0, config.vocab_size, (batch_size, length), device=device),
        "attention_mask": torch.ones(batch_size, length, dtype=torch.long, device=device),
        "labels": torch.randint(0, 2, (batch_size,), device=device),
    }
    model.train()

    def step() -> None:
        trainer.compute_loss(model, dict(batch)).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return model, step
