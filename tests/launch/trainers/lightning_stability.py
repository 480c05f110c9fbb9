"""A tiny real Lightning trainer that records predictions and weights (issue 5's capture under deviate-replicate).

Fixed, small and noisy data (20% of the training labels flipped) and a short training, so that replicas with
different seeds (``algo+impl``) disagree on some evaluation samples, while ``control`` replicas are identical.
The evaluation set carries a group field (``band``) in dict batches; predictions are taken after every epoch
and at the end of ``fit``, and the final weights are stored sketched and in full.
"""

from __future__ import annotations

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

from deviate_cb.lightning import DeviateCallback, Predictions, Weights

EPOCHS = 2


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def predict_step(self, batch, batch_idx, dataloader_idx=0):
        return self(batch["x"]).softmax(-1)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def _data(n: int, seed: int, noise: float) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)  # fixed data; init, order and dropout come from the replica's seed
    x = torch.randn(n, 8, generator=gen)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long() + (x[:, 2] > 1).long()
    flip = torch.rand(n, generator=gen) < noise
    return x, torch.where(flip, torch.randint(0, 3, (n,), generator=gen), y)


class EvalSet(Dataset):
    def __init__(self) -> None:
        self.x, self.y = _data(300, seed=99, noise=0.0)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict:
        return {"x": self.x[i], "label": self.y[i], "band": "high" if self.x[i, 3] > 0 else "low"}


def main(ctx):
    torch.set_num_threads(1)
    x, y = _data(256, seed=1234, noise=0.2)
    train = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    callback = DeviateCallback(
        predictions=Predictions(data=DataLoader(EvalSet(), batch_size=64), every_n_epochs=1, groups="band"),
        weights=Weights(sketch_dim=64, full=True),
    )
    trainer = L.Trainer(
        max_epochs=EPOCHS,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        default_root_dir=ctx.run_dir,
    )
    trainer.fit(Tiny(), train)
    return dict(trainer.callback_metrics)
