"""What the Hugging Face ``Trainer`` adapter drives: its logs as metric rows, and ``TrainingArguments`` taken over."""
