"""Fine-tune a sequence classifier, shaped like transformers' examples/pytorch/text-classification/run_glue.py.

python run_classification.py --output_dir out --do_train --do_eval --num_train_epochs 2 --seed 42
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field

import numpy as np
import tiny_data
import transformers
from transformers import HfArgumentParser, Trainer, TrainingArguments, set_seed

logger = logging.getLogger(__name__)


@dataclass
class ModelArguments:
    model_type: str = field(default="bert", metadata={"help": "bert or gpt2, built from its config"})
    hidden_size: int = field(default=16)
    num_layers: int = field(default=1)


@dataclass
class DataTrainingArguments:
    max_train_samples: int = field(default=96)
    max_eval_samples: int = field(default=32)
    max_seq_length: int = field(default=12)


def compute_metrics(prediction) -> dict[str, float]:
    predicted = np.argmax(prediction.predictions, axis=-1)
    return {"accuracy": float((predicted == prediction.label_ids).mean())}


def main() -> None:
    parser = HfArgumentParser((ModelArguments, DataTrainingArguments, TrainingArguments))
    model_args, data_args, training_args = parser.parse_args_into_dataclasses()
    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", handlers=[
        logging.StreamHandler(sys.stdout)])  # fmt: skip
    transformers.utils.logging.set_verbosity_warning()
    logger.warning(f"seed {training_args.seed}, output_dir {training_args.output_dir}")

    set_seed(training_args.seed)  # as the examples do, before the model is built
    train = tiny_data.dataset(data_args.max_train_samples, data_args.max_seq_length, seed=0)
    evaluation = tiny_data.dataset(data_args.max_eval_samples, data_args.max_seq_length, seed=1)
    model = tiny_data.classifier(model_args.model_type, model_args.hidden_size, model_args.num_layers)

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train if training_args.do_train else None,
        eval_dataset=evaluation if training_args.do_eval else None,
        processing_class=tiny_data.tokenizer(),
        compute_metrics=compute_metrics,
    )
    if training_args.do_train:
        result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
        trainer.save_model()
        trainer.log_metrics("train", result.metrics)
        trainer.save_metrics("train", result.metrics)
        trainer.save_state()
    if training_args.do_eval:
        metrics = trainer.evaluate()
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
        print(f"final: eval_accuracy={metrics['eval_accuracy']:.6f} eval_loss={metrics['eval_loss']:.6f}")


if __name__ == "__main__":
    main()
