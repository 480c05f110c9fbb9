"""A project's own Trainer subclass (a class-weighted loss, its own __init__) on a tiny GPT-2 classifier.

    python custom_trainer.py --output_dir out --num_train_epochs 2 --seed 7

``--unseeded_weights_from_step K`` draws the class weights from the OS's entropy from optimizer step K on: a source
of noise no seed controls, as a project may have one (``deviate audit`` finds where).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import tiny_data
import torch
from transformers import HfArgumentParser, Trainer, TrainingArguments


@dataclass
class NoiseArguments:
    unseeded_weights_from_step: int = field(default=-1)


class WeightedTrainer(Trainer):
    def __init__(self, *args, class_weights: list[float], unseeded_from: int = -1, **kwargs):
        super().__init__(*args, **kwargs)
        self.class_weights = torch.tensor(class_weights)
        self.unseeded_from = unseeded_from

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if 0 <= self.unseeded_from <= self.state.global_step:
            self.class_weights = torch.tensor([1.0, 1.0 + int.from_bytes(os.urandom(2), "big") / 65536])
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        loss = torch.nn.functional.cross_entropy(outputs.logits, labels, weight=self.class_weights)
        return (loss, outputs) if return_outputs else loss


def main() -> None:
    args, noise = HfArgumentParser((TrainingArguments, NoiseArguments)).parse_args_into_dataclasses()
    model = tiny_data.classifier("gpt2", hidden=16, layers=1)
    trainer = WeightedTrainer(
        model, args, train_dataset=tiny_data.dataset(96, 12, seed=0), eval_dataset=tiny_data.dataset(32, 12, seed=1),
        class_weights=[1.0, 2.0], unseeded_from=noise.unseeded_weights_from_step,
    )  # fmt: skip
    trainer.train()
    print(f"final: eval_loss={trainer.evaluate()['eval_loss']:.6f}")


if __name__ == "__main__":
    main()
