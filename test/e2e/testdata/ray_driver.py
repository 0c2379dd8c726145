"""A Ray Train script as Ray's docs write one: fit() under __main__, run as the driver."""

import argparse
import os
import tempfile

import torch

import ray.train
from ray.train import Checkpoint, CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer, prepare_data_loader, prepare_model

parser = argparse.ArgumentParser()
parser.add_argument("--name", required=True)
parser.add_argument("--fail-once", action="store_true", help="rank 1 raises after epoch 0 of attempt 1")
args = parser.parse_args()  # at the top level, once: the loop gets args with its globals


def train_loop_per_worker(config):
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = x.sum(dim=1, keepdim=True)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32, shuffle=True)
    loader = prepare_data_loader(loader)
    model = prepare_model(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    ctx = ray.train.get_context()
    start = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as folder:
            state = torch.load(os.path.join(folder, "state.pt"))
        model.module.load_state_dict(state["model"])
        start = state["epoch"] + 1
    print(f"WORKER rank={ctx.get_world_rank()} world={ctx.get_world_size()} start={start} "
          f"module={__name__} name={args.name}", flush=True)
    for epoch in range(start, config["epochs"]):
        if args.fail_once and epoch == 1 and ctx.get_world_rank() == 1 and os.environ["TRAINYARD_ATTEMPT"] == "1":
            raise RuntimeError("injected failure")
        for xb, yb in loader:
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with tempfile.TemporaryDirectory() as folder:
            checkpoint = None
            if ctx.get_world_rank() == 0:
                torch.save({"model": model.module.state_dict(), "epoch": epoch}, os.path.join(folder, "state.pt"))
                checkpoint = Checkpoint.from_directory(folder)
            ray.train.report({"loss": loss.item(), "epoch": epoch}, checkpoint=checkpoint)


if __name__ == "__main__":
    print(f"DRIVER pid={os.getpid()}", flush=True)
    trainer = TorchTrainer(
        train_loop_per_worker,
        train_loop_config={"lr": 0.05, "epochs": 3},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(
            name=args.name,
            checkpoint_config=CheckpointConfig(num_to_keep=2),
            failure_config=FailureConfig(max_failures=1),
        ),
    )
    result = trainer.fit()
    with result.checkpoint.as_directory() as folder:
        state = torch.load(os.path.join(folder, "state.pt"))
    print(
        f"DRIVER RESULT checkpoint={os.path.basename(result.checkpoint.path)} epoch={result.metrics['epoch']} "
        f"saved_epoch={state['epoch']} path={result.path}",
        flush=True,
    )
