"""Fine-tune a Fashion-MNIST classifier with checkpoints, fault tolerance and resumption.

Written the way Ray Train's user guide teaches it ("Saving and Loading Checkpoints",
"Handling Failures and Node Preemption"): each epoch rank 0 saves the model and optimizer into
a temporary folder and reports it with ``Checkpoint.from_directory``; at start the loop
resumes from ``ray.train.get_checkpoint()``; ``FailureConfig(max_failures=2)`` restarts the
workers after a failure, ``CheckpointConfig`` keeps the two best checkpoints by loss. Running
it again with the same ``--name`` and ``--storage-path`` resumes the same run.

    python3 finetune_checkpoints.py --epochs 4 --storage-path ~/ray_results
"""

import argparse
import os
import tempfile
import time

import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

import ray.train
from ray.train import Checkpoint, CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer


def build_model():
    return nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 128), nn.ReLU(), nn.Linear(128, 10))


def train_func(config):
    model = build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9)
    start_epoch = 0

    # Resume from the latest checkpoint, if this run has one (after a failure, or a rerun).
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as checkpoint_dir:
            state = torch.load(os.path.join(checkpoint_dir, "model.pt"))
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            start_epoch = state["epoch"] + 1
        print(f"resumed from the checkpoint of epoch {start_epoch - 1}")

    model = ray.train.torch.prepare_model(model)
    data = datasets.FashionMNIST(root=config["data"], train=True, download=True,
                                 transform=transforms.ToTensor())
    loader = ray.train.torch.prepare_data_loader(DataLoader(data, batch_size=32, shuffle=True))
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(start_epoch, config["epochs"]):
        if ray.train.get_context().get_world_size() > 1:
            loader.sampler.set_epoch(epoch)
        model.train()
        total, batches = 0.0, 0
        for X, y in loader:
            loss = loss_fn(model(X), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total, batches = total + loss.item(), batches + 1
            time.sleep(config.get("sleep_per_step", 0.0))
        metrics = {"loss": total / batches, "epoch": epoch}

        with tempfile.TemporaryDirectory() as tmp:
            checkpoint = None
            if ray.train.get_context().get_world_rank() == 0:
                module = model.module if hasattr(model, "module") else model
                torch.save({"model": module.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, os.path.join(tmp, "model.pt"))
                checkpoint = Checkpoint.from_directory(tmp)
            ray.train.report(metrics, checkpoint=checkpoint)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--name", default="finetune")
    p.add_argument("--storage-path", default=os.path.expanduser("~/ray_results"))
    p.add_argument("--data", default=os.path.expanduser("~/data"))
    p.add_argument("--sleep-per-step", type=float, default=0.0)
    args = p.parse_args()

    trainer = TorchTrainer(
        train_func,
        train_loop_config={"lr": 0.01, "epochs": args.epochs, "data": args.data,
                           "sleep_per_step": args.sleep_per_step},
        scaling_config=ScalingConfig(num_workers=args.workers, use_gpu=False),
        run_config=RunConfig(
            name=args.name,
            storage_path=args.storage_path,
            failure_config=FailureConfig(max_failures=2),
            checkpoint_config=CheckpointConfig(num_to_keep=2, checkpoint_score_attribute="loss",
                                               checkpoint_score_order="min"),
        ),
    )
    result = trainer.fit()
    print(f"Final metrics: {result.metrics}")
    print(f"Best checkpoint: {result.checkpoint.path}")


if __name__ == "__main__":
    main()
