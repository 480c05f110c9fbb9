"""Hugging Face part of ``callback_overhead.py``: what ``deviate_cb.transformers.DeviateCallback`` costs a Trainer step.

Run by ``callback_overhead.py`` (``--only transformers``), or alone::

    python benchmarks/transformers_overhead.py [--pairs 15] [--steps 200]

The worst case for a callback: a 1-layer BERT (hidden 32, built from its config), batch 16, ``logging_steps=1`` (the
Trainer logs loss, grad_norm and learning_rate every step, and the callback records each), no evaluation, no
checkpoints, one torch thread. Each round runs three ``trainer.train()`` calls of ``--steps`` optimizer steps, in an
order that rotates: bare, with DeviateCallback, with an empty ``TrainerCallback`` (the floor of any callback: the
Trainer calls every event of every callback). Measured: process CPU time over the whole ``train()`` (the callback's
start-up, flushes and end-of-run compaction included). Printed first, the answer: the median ratio with/bare over rounds
with its 95% order-statistic confidence interval (``deviate_cb.bench.stats.median_ratio_ci``), "meets" or "misses" the
goal only when the whole interval says so; then the empty callback's ratio, the microseconds a step spends in the
callback's per-step events (``on_step_begin`` + ``on_step_end`` + ``on_log``, ``perf_counter_ns`` around each, in an
extra wrapped run), and the metric rows kept against the values logged. Goal: at most 1.02x (a Trainer step is
milliseconds: the callback's hooks are tens of microseconds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_callback import PrinterCallback
from transformers.utils import logging as hf_logging

from deviate_cb.bench.stats import median_ratio_ci
from deviate_cb.transformers import DeviateCallback

GOAL = 1.02


class _Data(torch.utils.data.Dataset):
    """Token ids and labels made once (no tokenizer, nothing downloaded)."""

    def __init__(self, n: int, length: int = 16, vocab: int = 64) -> None:
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(1, vocab, (n, length), generator=generator)
        self.labels = (self.ids[:, 0] % 2).long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"input_ids": self.ids[index], "labels": self.labels[index]}


def _model() -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=2)  # fmt: skip
    return BertForSequenceClassification(config)


def _train(out: Path, steps: int, callbacks: list[Any]) -> float:
    """CPU seconds of one whole ``train()`` of ``steps`` optimizer steps."""
    args = TrainingArguments(
        output_dir=str(out), max_steps=steps, per_device_train_batch_size=16, logging_steps=1, save_strategy="no",
        eval_strategy="no", report_to="none", use_cpu=True, disable_tqdm=True, seed=0, dataloader_num_workers=0,
    )  # fmt: skip
    trainer = Trainer(model=_model(), args=args, train_dataset=_Data(16 * steps), callbacks=callbacks)
    trainer.remove_callback(PrinterCallback)  # with tqdm off it prints every log: no part of any callback's cost
    started = time.process_time()
    trainer.train()
    return time.process_time() - started


class _Timed(DeviateCallback):
    """DeviateCallback whose per-step events are timed (its own run: the timing costs time itself)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spent_ns = 0
        self.steps = 0

    def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
        started = time.perf_counter_ns()
        super().on_step_begin(*args, **kwargs)
        self.spent_ns += time.perf_counter_ns() - started
        self.steps += 1

    def on_step_end(self, *args: Any, **kwargs: Any) -> None:
        started = time.perf_counter_ns()
        super().on_step_end(*args, **kwargs)
        self.spent_ns += time.perf_counter_ns() - started

    def on_log(self, *args: Any, **kwargs: Any) -> None:
        started = time.perf_counter_ns()
        super().on_log(*args, **kwargs)
        self.spent_ns += time.perf_counter_ns() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15, help="rounds of bare / DeviateCallback / empty callback")
    parser.add_argument("--steps", type=int, default=200, help="optimizer steps of each train()")
    args = parser.parse_args()
    torch.set_num_threads(1)
    hf_logging.set_verbosity_error()
    warnings.filterwarnings("ignore")
    os.environ.setdefault("DEVIATE_FLUSH_INTERVAL_S", "10")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _train(root / "warm", 5, [])  # imports, first-call costs
        bare: list[float] = []
        deviate: list[float] = []
        empty: list[float] = []
        for round_ in range(args.pairs):
            kinds = ["bare", "deviate", "empty"]
            kinds = kinds[round_ % 3 :] + kinds[: round_ % 3]
            for kind in kinds:
                out = root / f"{kind}{round_}"
                if kind == "bare":
                    bare.append(_train(out, args.steps, []))
                elif kind == "deviate":
                    deviate.append(_train(out, args.steps, [DeviateCallback(root / "runs", experiment=f"r{round_}")]))
                else:
                    empty.append(_train(out, args.steps, [TrainerCallback()]))
        ci = median_ratio_ci([d / b for d, b in zip(deviate, bare, strict=True)], 0.95)
        verdict = "meets" if ci.high <= GOAL else "misses" if ci.low > GOAL else "cannot tell whether it meets"
        print(
            f"transformers Trainer, whole train() of {args.steps} steps (logging_steps=1), {args.pairs} rounds: "
            f"DeviateCallback {ci.median:.3f}x bare [{ci.level:.0%} CI {ci.low:.3f}-{ci.high:.3f}]: {verdict} "
            f"the goal of {GOAL:.2f}x"
        )
        empty_ratio = statistics.median(e / b for e, b in zip(empty, bare, strict=True))
        extra_ms = statistics.median((d - b) * 1e3 for d, b in zip(deviate, bare, strict=True))
        print(f"  empty TrainerCallback {empty_ratio:.3f}x; DeviateCallback +{extra_ms:.1f} ms CPU a train()")
        print(f"  bare train(): median {statistics.median(bare) * 1e3 / args.steps:.2f} ms CPU a step")
        timed = _Timed(root / "runs", experiment="timed")
        _train(root / "timed", args.steps, [timed])
        per_step_us = timed.spent_ns / 1e3 / timed.steps
        share = per_step_us / (statistics.median(bare) * 1e6 / args.steps)
        print(
            f"  per-step events (on_step_begin + on_step_end + on_log): {per_step_us:.1f} us, "
            f"{share:.2%} of a bare step"
        )
        rows = pq.read_table(Path(timed.run_dir) / "metrics.parquet").num_rows
        # loss, grad_norm, learning_rate every step, and the end-of-train summary (5 values)
        print(f"  metric rows kept: {rows} of {3 * args.steps + 5} logged")


if __name__ == "__main__":
    main()
