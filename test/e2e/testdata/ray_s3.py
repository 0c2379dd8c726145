"""A Ray Train script as multi-node users write one: RunConfig(storage_path="s3://...")
and no run name; rank 1 fails once after its first epoch (FailureConfig restarts it)."""

import json
import os
import tempfile

import torch

import ray.train
from ray.train import Checkpoint, FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer, prepare_model


def train_loop_per_worker(config):
    model = prepare_model(torch.nn.Linear(8, 1))
    ctx = ray.train.get_context()
    start = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as folder:
            start = torch.load(os.path.join(folder, "state.pt"))["epoch"] + 1
    print(f"WORKER rank={ctx.get_world_rank()} start={start}", flush=True)
    for epoch in range(start, 3):
        if epoch == 1 and ctx.get_world_rank() == 1 and os.environ["TRAINYARD_ATTEMPT"] == "1":
            raise RuntimeError("injected failure")
        with tempfile.TemporaryDirectory() as folder:
            torch.save({"model": model.module.state_dict(), "epoch": epoch}, os.path.join(folder, "state.pt"))
            ray.train.report({"epoch": epoch}, checkpoint=Checkpoint.from_directory(folder))
        # report() waited (checkpoint_upload_mode SYNC, the default) until the bucket had it.
        with open(os.path.join(os.environ["TRAINYARD_RUN_DIR"], ".trainyard-uploads.json")) as f:
            print(f"SYNC rank={ctx.get_world_rank()} epoch={epoch} uploaded={json.load(f)['uploaded']}", flush=True)


if __name__ == "__main__":
    trainer = TorchTrainer(train_loop_per_worker, scaling_config=ScalingConfig(num_workers=2),
                           run_config=RunConfig(storage_path="s3://ray/exp",
                                                failure_config=FailureConfig(max_failures=1)))
    result = trainer.fit()
    print(f"RESULT checkpoint={os.path.basename(result.checkpoint.path)} epoch={result.metrics['epoch']}", flush=True)
