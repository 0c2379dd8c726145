"""Ray Train's PyTorch quickstart, with every worker saving its own part of each checkpoint.

Written as Ray's "Get Started with PyTorch" quickstart is: no ``if __name__ == "__main__":``,
the TorchTrainer is built and ``fit()`` called at the top level, and every worker saves
``model.pt`` into a temporary folder and reports it with ``Checkpoint.from_directory``. Two
patterns from Ray's and torchrun's guides come with it:

- local rank 0 of each machine prepares the data set (here it writes a small synthetic one,
  as a download would) while the other workers of the machine wait at a barrier;
- each worker also saves a shard of its own, ``worker-<rank>.pt`` (its random state and what
  it trained on, standing in for the shard of a sharded model), and resumes from it: Ray
  Train 2.7+ merges the files of all the workers' checkpoints of a report into one
  checkpoint, and so does Trainyard. ``model.pt``, which every worker writes alike, is kept
  once.

    trainyard run -- python3 quickstart_sharded.py              # fit() starts 2 workers
    trainyard run --workers 2 -- python3 quickstart_sharded.py  # the gang runs the loop

In the first, as in Ray, the script is the driver: its top level runs once, and the workers
run only ``train_func`` (sent to them pickled by value, with the ``Net`` class it uses), so
what follows fit() (opening the checkpoint, listing the kept ones) runs once too. In the
second every rank runs the whole script, as torchrun does, and each prints the result.
"""

import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import ray.train
import ray.train.torch
from ray.train import Checkpoint, CheckpointConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer


class Net(nn.Module):
    """A small MLP, defined in the script as Ray's guides define theirs."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4))

    def forward(self, x):
        return self.layers(x)


def prepare_data(data_dir):
    """Local rank 0 writes the data set once; the other local ranks wait, then all read it."""
    ctx = ray.train.get_context()
    path = os.path.join(data_dir, "data.pt")
    if ctx.get_local_rank() == 0 and not os.path.exists(path):
        os.makedirs(data_dir, exist_ok=True)
        g = torch.Generator().manual_seed(0)
        X = torch.randn(2048, 20, generator=g)
        y = (X @ torch.randn(20, 4, generator=g)).argmax(dim=1)
        tmp = f"{path}.{os.getpid()}.tmp"
        torch.save({"X": X, "y": y}, tmp)
        os.replace(tmp, path)
        print(f"local rank 0 on node {ctx.get_node_rank()}: prepared the data set in {data_dir}")
    dist.barrier()  # the others wait for it
    data = torch.load(path)
    return TensorDataset(data["X"], data["y"])


def train_func(config):
    ctx = ray.train.get_context()
    rank = ctx.get_world_rank()
    print(f"worker {rank}: local rank {ctx.get_local_rank()} of {ctx.get_local_world_size()} "
          f"on node {ctx.get_node_rank()}, device {ray.train.torch.get_device()}")
    dataset = prepare_data(config["data_dir"])

    # [1] Prepare the model and the data loader for distributed training.
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    start, seen = 0, 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as checkpoint_dir:
            model.load_state_dict(torch.load(os.path.join(checkpoint_dir, "model.pt")))
            shard = torch.load(os.path.join(checkpoint_dir, f"worker-{rank}.pt"))
        torch.set_rng_state(shard["rng"])
        start, seen = shard["epoch"] + 1, shard["seen"]
        print(f"worker {rank}: resumed from its shard of epoch {shard['epoch']}")
    model = ray.train.torch.prepare_model(model)
    loader = ray.train.torch.prepare_data_loader(DataLoader(dataset, batch_size=64, shuffle=True))
    loss_fn = nn.CrossEntropyLoss()

    # [2] Train, and [3] report metrics and a checkpoint from every worker.
    for epoch in range(start, config["epochs"]):
        if ctx.get_world_size() > 1:
            loader.sampler.set_epoch(epoch)
        for X, y in loader:
            loss = loss_fn(model(X), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += len(y)
        metrics = {"loss": loss.item(), "epoch": epoch}
        with tempfile.TemporaryDirectory() as temp_checkpoint_dir:
            torch.save(model.module.state_dict() if hasattr(model, "module") else model.state_dict(),
                       os.path.join(temp_checkpoint_dir, "model.pt"))
            torch.save({"epoch": epoch, "seen": seen, "rng": torch.get_rng_state()},
                       os.path.join(temp_checkpoint_dir, f"worker-{rank}.pt"))
            ray.train.report(metrics, checkpoint=Checkpoint.from_directory(temp_checkpoint_dir))
        if rank == 0:
            print(metrics)


# [4] Configure scaling and resource requirements, and [5] launch distributed training.
scaling_config = ScalingConfig(num_workers=2, use_gpu=False)
trainer = TorchTrainer(
    train_func,
    train_loop_config={"epochs": 3, "data_dir": os.path.expanduser("~/data/quickstart-sharded")},
    scaling_config=scaling_config,
    run_config=RunConfig(name="quickstart-sharded", checkpoint_config=CheckpointConfig(num_to_keep=2)),
)
result = trainer.fit()
with result.checkpoint.as_directory() as checkpoint_dir:
    files = sorted(f for f in os.listdir(checkpoint_dir) if not f.startswith("."))
print(f"checkpoint {os.path.basename(result.checkpoint.path)} holds: {', '.join(files)}")
best = [os.path.basename(checkpoint.path) for checkpoint, _ in result.best_checkpoints]
on_disk = sorted(n for n in os.listdir(result.path) if n.startswith("checkpoint_"))
print(f"best_checkpoints: {', '.join(best)}; the run folder holds: {', '.join(on_disk)}")
