"""Step times of the Fashion-MNIST MLP with and without trainyard.report().

Run by bench/report under ``trainyard run --workers 2``. Every rank trains the KubeRay
guide's MLP (784-512-512-10, dropout, SGD with momentum) in DDP on synthetic data, batch
16 per rank, in three modes that take turns in blocks of steps, so that all three share
the machine's conditions:

- ``none``: no report;
- ``report``: ``trainyard.report(metrics)`` after every step, on every rank;
- ``checkpoint``: the same, and every ``--every`` steps of the mode rank 0 saves the model's
  state_dict with torch.save into ``trainyard.new_checkpoint_dir()`` and passes the folder
  as ``checkpoint=`` (the other ranks pass None).

A step's time is the training step (forward, backward, optimizer step, ``loss.item()``)
plus the report() call. torch.save is not timed: after it all ranks meet at a barrier,
also untimed, and only then is report() called and timed. Between blocks the ranks sleep
``--settle`` seconds and meet at a barrier, so that a background commit does not spill
into the next block's steps.

Each rank writes ``<out>/rank-<R>.json``: per mode, the step times and the report() call
times in nanoseconds, and for the checkpoint mode which steps carried a checkpoint.
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch import nn

import trainyard

MODES = ("none", "report", "checkpoint")
BATCH = 16


def parse_args():
    """Parse the command-line flags."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300, help="measured steps per mode")
    p.add_argument("--block", type=int, default=25, help="steps of one mode before the next takes over")
    p.add_argument("--every", type=int, default=10, help="checkpoint mode: a checkpoint every N of its steps")
    p.add_argument("--warmup", type=int, default=30, help="untimed steps first, reporting")
    p.add_argument("--settle", type=float, default=0.2, help="seconds of rest between blocks")
    p.add_argument("--out", required=True, help="folder for rank-<R>.json")
    return p.parse_args()


def build_model():
    """The KubeRay guide's MLP: 784-512-512-10 with dropout."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(28 * 28, 512), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(512, 512), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(512, 10),
    )


class Trainer:
    """One rank's model, optimizer and synthetic batches."""

    def __init__(self, rank):
        torch.manual_seed(42)
        self.model = trainyard.prepare_model(build_model())
        torch.manual_seed(42 + rank)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=1e-3, momentum=0.9)
        self.loss_fn = nn.CrossEntropyLoss()
        self.batches = [(torch.randn(BATCH, 1, 28, 28), torch.randint(0, 10, (BATCH,))) for _ in range(64)]
        self.step_count = 0

    def step(self):
        """Train one step; return the loss."""
        x, y = self.batches[self.step_count % len(self.batches)]
        self.step_count += 1
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def save(self):
        """Write the model's state_dict into a new checkpoint folder; return the folder."""
        folder = trainyard.new_checkpoint_dir()
        module = getattr(self.model, "module", self.model)
        torch.save(module.state_dict(), os.path.join(folder, "model.pt"))
        return folder


def timed_step(trainer, mode, rank, with_checkpoint):
    """Run one step of mode; return (step ns, report ns or None)."""
    t0 = time.perf_counter_ns()
    loss = trainer.step()
    if mode == "none":
        return time.perf_counter_ns() - t0, None
    metrics = {"loss": loss, "step": trainer.step_count}
    folder = None
    if with_checkpoint:
        paused = time.perf_counter_ns()
        if rank == 0:
            folder = trainer.save()
        dist.barrier()
        t0 += time.perf_counter_ns() - paused  # torch.save and the barrier are not timed
    r0 = time.perf_counter_ns()
    trainyard.report(metrics, checkpoint=folder)
    r1 = time.perf_counter_ns()
    return r1 - t0, r1 - r0


def run_block(trainer, mode, steps, every, rank, record):
    """Run one block of steps of mode, adding its times to record."""
    for _ in range(steps):
        n = len(record["step_ns"])
        with_checkpoint = mode == "checkpoint" and (n + 1) % every == 0
        step_ns, report_ns = timed_step(trainer, mode, rank, with_checkpoint)
        record["step_ns"].append(step_ns)
        if report_ns is not None:
            record["report_ns"].append(report_ns)
            record["checkpoint"].append(with_checkpoint)


def settle(seconds):
    """Rest, then meet the other ranks, between blocks."""
    time.sleep(seconds)
    dist.barrier()


def main():
    """Warm up, run the modes in turns, write this rank's times."""
    args = parse_args()
    trainyard.init_process_group()
    rank = trainyard.get_context().rank
    trainer = Trainer(rank)
    for _ in range(args.warmup):
        timed_step(trainer, "report", rank, False)
    records = {m: {"step_ns": [], "report_ns": [], "checkpoint": []} for m in MODES}
    rounds = -(-args.steps // args.block)
    for r in range(rounds):
        settle(args.settle)
        for i in range(len(MODES)):
            mode = MODES[(r + i) % len(MODES)]  # rotate which mode follows which
            steps = min(args.block, args.steps - r * args.block)
            run_block(trainer, mode, steps, args.every, rank, records[mode])
            settle(args.settle)
    out = {"rank": rank, "threads": torch.get_num_threads(), "torch": torch.__version__,
           "block": args.block, "every": args.every, "modes": records}
    with open(os.path.join(args.out, f"rank-{rank}.json"), "w") as f:
        json.dump(out, f)
    if rank == 0:
        print(f"steps.py: done, {sum(len(r['step_ns']) for r in records.values())} measured steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
