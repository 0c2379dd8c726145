"""A Ray Train script for Ray's job clients: fit() asks for a gang of N workers with a GPU each.

Submitted to `trainyard server` (`ray job submit -- python3 ray_server_gang.py N`), it is
Ray's driver: the server leases the gang's GPUs from its scheduler. Each worker prints the
GPUs it was given; the driver prints the Result.
"""

import os
import sys

import ray.train
from ray.train import ScalingConfig
from ray.train.torch import TorchTrainer


def train_loop_per_worker(config):
    ctx = ray.train.get_context()
    # Every rank sees the gang's GPUs on its host (CUDA_VISIBLE_DEVICES, as under Ray);
    # TRAINYARD_CUDA_DEVICE names its own.
    print(f"GANG rank={ctx.get_world_rank()} world={ctx.get_world_size()} "
          f"cuda=[{os.environ.get('TRAINYARD_CUDA_DEVICE', '')}] visible=[{os.environ.get('CUDA_VISIBLE_DEVICES', '')}]", flush=True)
    ray.train.report({"step": 1})


if __name__ == "__main__":
    print(f"DRIVER pid={os.getpid()} cuda=[{os.environ.get('CUDA_VISIBLE_DEVICES', '')}]", flush=True)
    trainer = TorchTrainer(train_loop_per_worker,
                           scaling_config=ScalingConfig(num_workers=int(sys.argv[1]), use_gpu=True))
    result = trainer.fit()
    print(f"DRIVER RESULT metrics={result.metrics}", flush=True)
