"""Distributed (DDP) Fashion-MNIST training example for Trainyard.

This is the PyTorch Fashion-MNIST example from Ray's KubeRay guide, rewritten
as a plain DistributedDataParallel script: an MLP 784-512-512-10 trained with
SGD (lr 1e-3, momentum 0.9) and a global batch size of 32.

It is meant to be started by ``trainyard run``, and uses Trainyard's in-job
helper (the ``trainyard`` Python module, put on PYTHONPATH by the launcher):
``init_process_group`` and ``prepare_model`` set up DDP, ``report`` records
each epoch's metrics with a checkpoint of the model and optimizer, and
``get_checkpoint`` resumes from the latest committed checkpoint after a
failure or an interruption. When the job is preempted (Ctrl-C, SIGTERM, a job
of higher priority, a pod evicted), ``preemption()`` says so: the ranks save a
checkpoint at the step they reached, and the next start continues from that
step, not from the last epoch. It also runs under ``torchrun`` or alone (then
with ``python/`` on PYTHONPATH), as a single process without WORLD_SIZE.

The data set is read from the four gzipped IDX files of Fashion-MNIST, as
installed by Debian's ``dataset-fashion-mnist`` package. Only the standard
library, numpy and torch are used (no torchvision).
"""

import argparse
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Subset, TensorDataset

import trainyard

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
                   help="every rank prints one line per training step, and "
                        "'first step done' after its first (for benchmarks)")
    p.add_argument("--sleep-per-step", type=float, default=0.0,
                   metavar="SECONDS", help="sleep after each training step")
    p.add_argument("--preemption-check-steps", type=int, default=10,
                   metavar="N", help="every N steps the ranks agree whether "
                   "the job is being preempted (0: never)")
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
    """Build the train loader (sharded by the helper) and this rank's test shard."""
    train_ds = load_split(args.data_dir, "train", args.train_subset)
    test_ds = load_split(args.data_dir, "test", args.test_subset)
    train_loader = trainyard.prepare_data_loader(
        DataLoader(train_ds, batch_size=ctx["batch_size"], shuffle=True))
    # Strided shard without padding, so the reduced counts are exact.
    test_shard = Subset(test_ds, range(ctx["rank"], len(test_ds),
                                       ctx["world_size"]))
    test_loader = DataLoader(test_shard, batch_size=ctx["batch_size"],
                             shuffle=False, num_workers=0)
    return train_loader, test_loader


# ---------------------------------------------------------------- setup


def build_model():
    """The KubeRay guide's MLP: 784-512-512-10 with dropout."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(28 * 28, 512), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(512, 512), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(512, 10),
    )


def setup_distributed():
    """Initialise the process group (when launched as a gang); return a context."""
    trainyard.init_process_group()
    info = trainyard.get_context()
    distributed = dist.is_initialized()
    return {
        "distributed": distributed, "world_size": info.world_size,
        "rank": info.rank, "local_rank": info.local_rank,
        "backend": dist.get_backend() if distributed else "none",
        "device": trainyard.get_device(), "attempt": info.attempt,
        "run_name": info.run_name,
        # The global batch stays GLOBAL_BATCH_SIZE whatever the world size, so an
        # elastic gang that shrinks (--workers MIN:MAX) keeps its learning rate: only
        # the batch per rank grows, and DistributedSampler re-shards the data.
        "batch_size": max(1, GLOBAL_BATCH_SIZE // info.world_size),
        "previous_world_size": info.previous_world_size,
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
    if ctx["run_name"]:
        parts += [f"attempt={ctx['attempt']}", f"run_name={ctx['run_name']}"]
    if ctx["previous_world_size"]:
        parts += [f"resized_from={ctx['previous_world_size']}"]
    return "starting fashion-mnist: " + " ".join(parts)


# ---------------------------------------------------------------- training


def all_reduce_sums(ctx, values):
    """Sum a list of numbers over all ranks (no-op in a single process)."""
    t = torch.tensor(values, dtype=torch.float64, device=ctx["device"])
    if ctx["distributed"]:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


def preempted(ctx, state, step_in_epoch):
    """Whether the ranks agree that the job is being preempted.

    Every rank asks at the same steps, and a max all-reduce makes them agree,
    so that all of them stop after the same step even if the notice reaches
    them at different times (on several machines).
    """
    every = state["args"].preemption_check_steps
    if every <= 0 or step_in_epoch % every:
        return False
    flag = [1.0 if trainyard.preemption() is not None else 0.0]
    if ctx["distributed"]:
        t = torch.tensor(flag, device=ctx["device"])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        flag = t.tolist()
    return flag[0] > 0


def train_epoch(model, loader, optimizer, loss_fn, ctx, state, skip=0):
    """Train one epoch, after its first skip steps (done before a preemption);
    return the global mean training loss."""
    model.train()
    loss_sum, count = 0.0, 0
    for i, (x, y) in enumerate(loader):  # the helper's loader moves batches to the device
        if i < skip:
            continue
        if not state["saved_for_preemption"] and preempted(ctx, state, i):
            save_for_preemption(model, optimizer, ctx, state, i, len(loader))
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
    if state["step"] == 1 and state["args"].log_steps:
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


def save_for_preemption(model, optimizer, ctx, state, step_in_epoch, steps):
    """Save and report a checkpoint of the epoch at step_in_epoch, once.

    Training then goes on: the launcher stops the gang once the checkpoint is
    committed (or at the notice's deadline), and the next start continues from
    it. Returning instead would end a rank with 0, which a gang on several
    machines, where the notice reached only one, would take for success.
    """
    notice = trainyard.preemption_info()  # None on a machine it did not reach
    epoch = state["epoch"]
    log0(ctx, f"preempted ({notice.reason if notice else 'on another machine'}): "
              f"saving epoch {epoch} at step {step_in_epoch}")
    folder = save_checkpoint(model, optimizer, epoch, step_in_epoch) if ctx["rank"] == 0 else None
    trainyard.report({"epoch": epoch - 1 + step_in_epoch / steps}, checkpoint=folder)
    state["saved_for_preemption"] = True


def save_checkpoint(model, optimizer, epoch, step_in_epoch=None, accuracy=None):
    """Write model, optimizer and epoch into a fresh checkpoint folder (rank 0).
    step_in_epoch marks a checkpoint taken in the middle of epoch (a
    preemption) after that many of its steps, 0 included; None, one taken
    once epoch was done, with its test accuracy."""
    folder = trainyard.new_checkpoint_dir()
    module = getattr(model, "module", model)
    torch.save({"model": module.state_dict(),
                "optimizer": optimizer.state_dict(), "epoch": epoch,
                "step_in_epoch": step_in_epoch, "test_accuracy": accuracy},
               os.path.join(folder, "checkpoint.pt"))
    return folder


def load_checkpoint(model, optimizer, ctx, epochs):
    """Resume from the latest committed checkpoint; return the epoch to
    continue at, the steps of it already done, and the checkpoint's name and
    test accuracy (None when it has none: saved mid-epoch, or by an older
    version of this script)."""
    folder = trainyard.get_checkpoint()
    if folder is None:
        return 1, 0, None, None
    state = torch.load(os.path.join(folder, "checkpoint.pt"),
                       map_location=ctx["device"])
    getattr(model, "module", model).load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    name, epoch, done = os.path.basename(folder), state["epoch"], state.get("step_in_epoch")
    if done is not None:  # saved at a preemption, after `done` steps of epoch (maybe 0)
        log0(ctx, f"resuming from {name}: epoch {epoch} at step {done}, "
                  f"continuing at step {done + 1}")
        return epoch, done, name, None
    if epoch >= epochs:
        log0(ctx, f"resumed from {name}, the checkpoint of epoch {epoch}: "
                  f"training had already finished (--epochs {epochs})")
    else:
        log0(ctx, f"resuming from {name}: epoch {epoch} done, continuing at {epoch + 1}")
    return epoch + 1, 0, name, state.get("test_accuracy")


def fit(args, ctx):
    """Build model and data, train for args.epochs; return the final accuracy
    and, when there was nothing left to train, the checkpoint it is of."""
    torch.manual_seed(args.seed)
    model = trainyard.prepare_model(build_model())
    # Same initial weights everywhere, but distinct dropout masks per rank.
    torch.manual_seed(args.seed + ctx["rank"])
    train_loader, test_loader = make_loaders(args, ctx)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE,
                                momentum=MOMENTUM)
    state = {"args": args, "step": 0, "last": START_TIME, "epoch": 0,
             "saved_for_preemption": False}
    first, skip, name, accuracy = load_checkpoint(model, optimizer, ctx, args.epochs)
    if first > args.epochs:  # resumed after the last epoch: nothing left to train
        if accuracy is None:  # a checkpoint without it: measure it
            _, accuracy = evaluate(model, test_loader, loss_fn, ctx)
        return accuracy, name
    for epoch in range(first, args.epochs + 1):
        started = time.monotonic()
        train_loader.set_epoch(epoch)
        state["epoch"] = epoch
        train_loss = train_epoch(model, train_loader, optimizer, loss_fn,
                                 ctx, state, skip if epoch == first else 0)
        test_loss, accuracy = evaluate(model, test_loader, loss_fn, ctx)
        log0(ctx, f"epoch {epoch}/{args.epochs}: train_loss={train_loss:.4f} "
                  f"test_loss={test_loss:.4f} test_accuracy={accuracy:.2f}% "
                  f"time={time.monotonic() - started:.1f}s")
        folder = (save_checkpoint(model, optimizer, epoch, accuracy=accuracy)
                  if ctx["rank"] == 0 else None)
        trainyard.report({"epoch": epoch, "train_loss": train_loss,
                          "test_loss": test_loss, "accuracy": accuracy},
                         checkpoint=folder)
    return accuracy, None


def main(argv=None):
    args = parse_args(argv)
    check_data_files(args.data_dir)
    ctx = setup_distributed()
    try:
        log0(ctx, startup_line(ctx))
        accuracy, resumed = fit(args, ctx)
        of = f" (of {resumed}; nothing was left to train)" if resumed else ""
        log0(ctx, f"done: final test_accuracy={accuracy:.2f}%{of}")
    finally:
        if ctx["distributed"] and dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
