"""A Ray Train driver whose gang fails for good, then continues with TorchTrainer.restore.

Rank 1 raises at epoch fail_at in every attempt (rank 0 waits there to be stopped): fit()
raises TrainingFailedError, which carries rank 1's exception and traceback. restore() then continues the run with its own
CheckpointConfig and FailureConfig (only train_loop_config given again, without the
failure), and the driver prints the Result as Ray does.
"""

import os
import tempfile
import time

import ray.train
from ray.train import Checkpoint, CheckpointConfig, FailureConfig, RunConfig, ScalingConfig, TrainingFailedError
from ray.train.torch import TorchTrainer


def train_loop_per_worker(config):
    ctx = ray.train.get_context()
    start = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as folder, open(os.path.join(folder, "epoch"), encoding="utf-8") as f:
            start = int(f.read()) + 1
    for epoch in range(start, config["epochs"]):
        if epoch == config["fail_at"]:
            if ctx.get_world_rank() == 1:
                raise ValueError(f"injected failure at epoch {epoch}")
            time.sleep(120)  # rank 0 waits, as in a collective, until the gang is stopped
        with tempfile.TemporaryDirectory() as folder:
            checkpoint = None
            if ctx.get_world_rank() == 0:
                with open(os.path.join(folder, "epoch"), "w", encoding="utf-8") as f:
                    f.write(str(epoch))
                checkpoint = Checkpoint.from_directory(folder)
            ray.train.report({"epoch": epoch}, checkpoint=checkpoint)


if __name__ == "__main__":
    trainer = TorchTrainer(
        train_loop_per_worker,
        train_loop_config={"epochs": 4, "fail_at": 2},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(
            name="gang",
            checkpoint_config=CheckpointConfig(num_to_keep=2),
            failure_config=FailureConfig(max_failures=1),
        ),
    )
    try:
        trainer.fit()
    except TrainingFailedError as e:
        failures = {rank: type(exc).__name__ for rank, exc in e.worker_failures.items()}
        print(f"DRIVER FAILED worker_failures={failures}\n{e}", flush=True)
    path = os.path.join(os.environ["TRAINYARD_STORAGE_PATH"], "gang")
    restored = TorchTrainer.restore(path, train_loop_config={"epochs": 4, "fail_at": -1})
    rc = restored.run_config
    print(f"DRIVER RESTORED num_to_keep={rc.checkpoint_config.num_to_keep} "
          f"max_failures={rc.failure_config.max_failures}", flush=True)
    result = restored.fit()
    print(f"DRIVER RESULT {result!r}", flush=True)
