"""A Ray Train script for Ray's job clients: fit() asks for a gang of N workers with a GPU each.

Submitted to `trainyard server` (`ray job submit -- python3 ray_server_gang.py N`), it is
Ray's driver: the server leases the gang's GPUs from its scheduler. Each worker prints the
GPUs it was given; the driver prints the Result. More arguments: `cpu=C` (each worker's
resources_per_worker CPU), `gpu=0` (no GPUs), `hold=PATH` (each worker waits until PATH
exists before it reports).
"""

import os
import sys
import time

import ray.train
from ray.train import ScalingConfig
from ray.train.torch import TorchTrainer


def train_loop_per_worker(config):
    ctx = ray.train.get_context()
    # Every rank sees the gang's GPUs on its host (CUDA_VISIBLE_DEVICES, as under Ray);
    # TRAINYARD_CUDA_DEVICE names its own.
    print(f"GANG rank={ctx.get_world_rank()} world={ctx.get_world_size()} "
          f"cuda=[{os.environ.get('TRAINYARD_CUDA_DEVICE', '')}] visible=[{os.environ.get('CUDA_VISIBLE_DEVICES', '')}]", flush=True)
    while config.get("hold") and not os.path.exists(config["hold"]):
        time.sleep(0.2)
    ray.train.report({"step": 1})


if __name__ == "__main__":
    print(f"DRIVER pid={os.getpid()} cuda=[{os.environ.get('CUDA_VISIBLE_DEVICES', '')}]", flush=True)
    opts = dict(arg.split("=", 1) for arg in sys.argv[2:])
    per = {"CPU": float(opts["cpu"])} if "cpu" in opts else None
    trainer = TorchTrainer(train_loop_per_worker, train_loop_config={"hold": opts.get("hold")},
                           scaling_config=ScalingConfig(num_workers=int(sys.argv[1]), use_gpu=opts.get("gpu") != "0",
                                                        resources_per_worker=per))
    result = trainer.fit()
    print(f"DRIVER RESULT metrics={result.metrics}", flush=True)
