"""A Ray Train script, as Ray's docs write one: TorchTrainer, a report with a checkpoint per epoch."""

import os
import tempfile

import torch

import ray.train
from ray.train import Checkpoint, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer, get_device, prepare_data_loader, prepare_model


def train_loop_per_worker(config):
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = x.sum(dim=1, keepdim=True)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32, shuffle=True)
    loader = prepare_data_loader(loader)
    model = prepare_model(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    start = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as folder:
            state = torch.load(os.path.join(folder, "state.pt"))
        model.module.load_state_dict(state["model"])
        start = state["epoch"] + 1
    for epoch in range(start, config["epochs"]):
        for xb, yb in loader:
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with tempfile.TemporaryDirectory() as folder:
            checkpoint = None
            if ray.train.get_context().get_world_rank() == 0:
                torch.save({"model": model.module.state_dict(), "epoch": epoch}, os.path.join(folder, "state.pt"))
                checkpoint = Checkpoint.from_directory(folder)
            ray.train.report({"loss": loss.item(), "epoch": epoch}, checkpoint=checkpoint)


trainer = TorchTrainer(
    train_loop_per_worker,
    train_loop_config={"lr": 0.05, "epochs": 3},
    scaling_config=ScalingConfig(num_workers=2),
    run_config=RunConfig(name="ray-train"),
)
result = trainer.fit()
ctx = ray.train.get_context()
with result.checkpoint.as_directory() as folder:
    state = torch.load(os.path.join(folder, "state.pt"))
print(
    f"RESULT rank={ctx.get_world_rank()} world={ctx.get_world_size()} device={get_device()} "
    f"checkpoint={os.path.basename(result.checkpoint.path)} epoch={result.metrics['epoch']} "
    f"saved_epoch={state['epoch']} path={result.path} ray={ray.__file__}",
    flush=True,
)
