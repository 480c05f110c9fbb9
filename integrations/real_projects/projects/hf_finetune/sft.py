"""Supervised fine-tuning of a tiny causal LM with TRL's SFTTrainer (its own config class, built on TrainingArguments).

python sft.py --output_dir out --max_steps 6 --seed 42
"""

from __future__ import annotations

import datasets
import tiny_data
from transformers import HfArgumentParser
from trl import SFTConfig, SFTTrainer


def main() -> None:
    (config,) = HfArgumentParser(SFTConfig).parse_args_into_dataclasses()
    texts = tiny_data.sentences(64, seed=0)["text"]
    train = datasets.Dataset.from_dict({"text": texts})
    trainer = SFTTrainer(
        model=tiny_data.causal_lm(hidden=16, layers=1), args=config, train_dataset=train,
        processing_class=tiny_data.tokenizer(),
    )  # fmt: skip
    result = trainer.train()
    print(f"final: train_loss={result.training_loss:.6f}")


if __name__ == "__main__":
    main()
