"""A Ray Train script with ScalingConfig(use_gpu=True), for a machine with a GPU.

Run as Ray's driver under Trainyard (`trainyard run -- python3 ray_use_gpu.py RUNS`): fit()
starts a gang of one worker with one GPU. The worker checks what Ray Train promises with
use_gpu=True: get_device() is a CUDA device, prepare_model() moves the model there (and
wraps it in DDP over NCCL), prepare_data_loader() moves each batch there. It trains three
epochs of a small MLP on random data and reports a checkpoint each epoch; the driver
prints the Result.
"""

import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F

import ray.train
from ray.train import Checkpoint, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer, get_device, prepare_data_loader, prepare_model


def train_loop_per_worker(config):
    device = get_device()
    start = 0
    ckpt = ray.train.get_checkpoint()
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    if ckpt:
        with ckpt.as_directory() as d:
            state = torch.load(os.path.join(d, "model.pt"), map_location="cpu")
            model.load_state_dict(state["model"])
            start = state["epoch"] + 1
    model = prepare_model(model)
    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(8192, 784, generator=g), torch.randint(0, 10, (8192,), generator=g))
    loader = prepare_data_loader(torch.utils.data.DataLoader(data, batch_size=256, shuffle=True))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    print(f"WORKER device={device} param={next(model.parameters()).device} backend={dist.get_backend()} "
          f"ddp={type(model).__name__} cvd=[{os.environ.get('CUDA_VISIBLE_DEVICES')}] "
          f"name={torch.cuda.get_device_name(device)} start_epoch={start}", flush=True)
    for epoch in range(start, config["epochs"]):
        for x, y in loader:
            assert x.device.type == "cuda", x.device
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with tempfile.TemporaryDirectory() as d:
            inner = model.module if hasattr(model, "module") else model
            torch.save({"model": inner.state_dict(), "epoch": epoch}, os.path.join(d, "model.pt"))
            ray.train.report({"epoch": epoch, "loss": loss.item(), "device": str(device)},
                             checkpoint=Checkpoint.from_directory(d))


if __name__ == "__main__":
    storage = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/ray_results")
    trainer = TorchTrainer(train_loop_per_worker, train_loop_config={"epochs": 3},
                           scaling_config=ScalingConfig(num_workers=1, use_gpu=True),
                           run_config=RunConfig(name="ray-gpu", storage_path=storage))
    result = trainer.fit()
    print(f"DRIVER metrics={result.metrics} checkpoint={result.checkpoint}", flush=True)
