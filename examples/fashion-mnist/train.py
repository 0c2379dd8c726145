"""Distributed (DDP) Fashion-MNIST training example for Trainyard.

This is the PyTorch Fashion-MNIST example from Ray's KubeRay guide, rewritten
as a plain DistributedDataParallel script: an MLP 784-512-512-10 trained with
SGD (lr 1e-3, momentum 0.9) and a global batch size of 32.

It is meant to be started by ``trainyard run`` (or by ``torchrun``), which set
the usual environment: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK
and LOCAL_WORLD_SIZE. Trainyard also sets TRAINYARD_ATTEMPT (1-based) and
TRAINYARD_RUN_NAME, which rank 0 prints in its startup line. Without
WORLD_SIZE the script trains in a single process, with no process group.

The data set is read from the four gzipped IDX files of Fashion-MNIST, as
installed by Debian's ``dataset-fashion-mnist`` package. Only the standard
library, numpy and torch are used (no torchvision).
"""

import argparse
import datetime
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Subset, TensorDataset
from torch.utils.data.distributed import DistributedSampler

START_TIME = time.monotonic()

GLOBAL_BATCH_SIZE = 32
LEARNING_RATE = 1e-3
MOMENTUM = 0.9
MEAN, STD = 0.2860, 0.3530
DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
DATA_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


def parse_args(argv=None):
    """Parse the command-line flags."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--train-subset", type=int, default=0, metavar="N",
                   help="use only the first N training samples (0 = all)")
    p.add_argument("--test-subset", type=int, default=0, metavar="N",
                   help="use only the first N test samples (0 = all)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    p.add_argument("--log-steps", action="store_true",
                   help="every rank prints one line per training step")
    p.add_argument("--sleep-per-step", type=float, default=0.0,
                   metavar="SECONDS", help="sleep after each training step")
    p.add_argument("--timeout-seconds", type=float, default=60.0,
                   help="process group timeout")
    return p.parse_args(argv)


# ---------------------------------------------------------------- data


def check_data_files(data_dir):
    """Exit with code 2 and a one-line hint if a data file is missing."""
    for name in sum(DATA_FILES.values(), ()):
        path = os.path.join(data_dir, name)
        if not os.path.isfile(path):
            print(f"error: {path} not found; install Debian's "
                  "dataset-fashion-mnist package "
                  "(apt-get install dataset-fashion-mnist) "
                  "or pass --data-dir", file=sys.stderr, flush=True)
            sys.exit(2)


def read_idx(path, offset):
    """Return the uint8 payload of a gzipped IDX file after its header."""
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def load_split(data_dir, split, limit):
    """Load one split as a TensorDataset of normalised images and labels."""
    image_file, label_file = DATA_FILES[split]
    images = read_idx(os.path.join(data_dir, image_file), 16)
    labels = read_idx(os.path.join(data_dir, label_file), 8)
    images = images.reshape(-1, 28, 28)
    if limit > 0:
        images, labels = images[:limit], labels[:limit]
    x = (images.astype(np.float32) / 255.0 - MEAN) / STD
    y = labels.astype(np.int64)
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(y))


def make_loaders(args, ctx):
    """Build the sharded train and test loaders for this rank."""
    train_ds = load_split(args.data_dir, "train", args.train_subset)
    test_ds = load_split(args.data_dir, "test", args.test_subset)
    sampler = DistributedSampler(train_ds, num_replicas=ctx["world_size"],
                                 rank=ctx["rank"], shuffle=True,
                                 seed=args.seed)
    train_loader = DataLoader(train_ds, batch_size=ctx["batch_size"],
                              sampler=sampler, num_workers=0)
    # Strided shard without padding, so the reduced counts are exact.
    test_shard = Subset(test_ds, range(ctx["rank"], len(test_ds),
                                       ctx["world_size"]))
    test_loader = DataLoader(test_shard, batch_size=ctx["batch_size"],
                             shuffle=False, num_workers=0)
    return train_loader, test_loader, sampler


# ---------------------------------------------------------------- setup


def build_model():
    """The KubeRay guide's MLP: 784-512-512-10 with dropout."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(28 * 28, 512), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(512, 512), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(512, 10),
    )


def setup_distributed(args):
    """Initialise the process group if WORLD_SIZE is set; return a context."""
    distributed = "WORLD_SIZE" in os.environ
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        backend, device = "nccl", torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        backend, device = "gloo", torch.device("cpu")
    if distributed:
        dist.init_process_group(
            backend=backend, init_method="env://", world_size=world_size,
            rank=rank,
            timeout=datetime.timedelta(seconds=args.timeout_seconds))
    return {
        "distributed": distributed, "world_size": world_size, "rank": rank,
        "local_rank": local_rank, "backend": backend if distributed else
        "none", "device": device,
        "batch_size": max(1, GLOBAL_BATCH_SIZE // world_size),
    }


def emit(message):
    """Print one line with a single write, then flush.

    print() writes the text and its newline separately when Python is
    unbuffered (PYTHONUNBUFFERED=1), so lines of ranks sharing one stdout
    could interleave mid-line.
    """
    print(message + "\n", end="", flush=True)


def log0(ctx, message):
    """Print from rank 0 only."""
    if ctx["rank"] == 0:
        emit(message)


def startup_line(ctx):
    """Describe the run: world size, backend, device, attempt, run name."""
    parts = [f"world_size={ctx['world_size']}", f"backend={ctx['backend']}",
             f"device={ctx['device']}",
             f"batch_per_rank={ctx['batch_size']}"]
    for key, env in (("attempt", "TRAINYARD_ATTEMPT"),
                     ("run_name", "TRAINYARD_RUN_NAME")):
        if os.environ.get(env):
            parts.append(f"{key}={os.environ[env]}")
    return "starting fashion-mnist: " + " ".join(parts)


# ---------------------------------------------------------------- training


def all_reduce_sums(ctx, values):
    """Sum a list of numbers over all ranks (no-op in a single process)."""
    t = torch.tensor(values, dtype=torch.float64, device=ctx["device"])
    if ctx["distributed"]:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


def train_epoch(model, loader, optimizer, loss_fn, ctx, state):
    """Train one epoch; return the global mean training loss."""
    model.train()
    loss_sum, count = 0.0, 0
    for x, y in loader:
        x, y = x.to(ctx["device"]), y.to(ctx["device"])
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        loss_value = loss.item()
        loss_sum += loss_value * len(y)
        count += len(y)
        after_step(ctx, state, loss_value)
    loss_sum, count = all_reduce_sums(ctx, [loss_sum, count])
    return loss_sum / max(count, 1)


def after_step(ctx, state, loss_value):
    """Per-step bookkeeping: step logging, first-step marker, sleeping."""
    now = time.monotonic()
    state["step"] += 1
    if state["args"].log_steps:
        # Wall time between step completions; for step 1, since start-up.
        emit(f"step {state['step']} time {now - state['last']:.4f} "
             f"loss {loss_value:.4f}")
    if state["step"] == 1:
        emit("first step done")
    state["last"] = now
    if state["args"].sleep_per_step > 0:
        time.sleep(state["args"].sleep_per_step)


@torch.no_grad()
def evaluate(model, loader, loss_fn, ctx):
    """Return the global (test_loss, test_accuracy_percent) over all shards."""
    model.eval()
    loss_sum, correct, total = 0.0, 0, 0
    for x, y in loader:
        x, y = x.to(ctx["device"]), y.to(ctx["device"])
        logits = model(x)
        loss_sum += loss_fn(logits, y).item() * len(y)
        correct += (logits.argmax(dim=1) == y).sum().item()
        total += len(y)
    loss_sum, correct, total = all_reduce_sums(ctx, [loss_sum, correct, total])
    return loss_sum / max(total, 1), 100.0 * correct / max(total, 1)


def fit(args, ctx):
    """Build model and data, train for args.epochs; return final accuracy."""
    torch.manual_seed(args.seed)
    model = build_model().to(ctx["device"])
    if ctx["distributed"]:
        device_ids = [ctx["device"]] if ctx["device"].type == "cuda" else None
        model = DistributedDataParallel(model, device_ids=device_ids)
    # Same initial weights everywhere, but distinct dropout masks per rank.
    torch.manual_seed(args.seed + ctx["rank"])
    train_loader, test_loader, sampler = make_loaders(args, ctx)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE,
                                momentum=MOMENTUM)
    state = {"args": args, "step": 0, "last": START_TIME}
    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        started = time.monotonic()
        sampler.set_epoch(epoch)
        train_loss = train_epoch(model, train_loader, optimizer, loss_fn,
                                 ctx, state)
        test_loss, accuracy = evaluate(model, test_loader, loss_fn, ctx)
        log0(ctx, f"epoch {epoch}/{args.epochs}: train_loss={train_loss:.4f} "
                  f"test_loss={test_loss:.4f} test_accuracy={accuracy:.2f}% "
                  f"time={time.monotonic() - started:.1f}s")
    return accuracy


def main(argv=None):
    args = parse_args(argv)
    check_data_files(args.data_dir)
    ctx = setup_distributed(args)
    try:
        log0(ctx, startup_line(ctx))
        accuracy = fit(args, ctx)
        log0(ctx, f"done: final test_accuracy={accuracy:.2f}%")
    finally:
        if ctx["distributed"] and dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
