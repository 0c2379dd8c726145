"""A small DDP job for bench/cluster's -inplace mode: a tiny model over gloo, CPU only.

Every attempt, once its process group is up (init_process_group and a first all-reduce),
each rank appends a line to MARKS/rank-<rank>: the attempt, the Unix time, the CPU
seconds the process has used so far (importing torch and joining) and the Unix time its
Python started this script (before importing torch), then prints "in the process group".
It then trains until it is stopped; with --checkpoint-every N it reports a checkpoint
through Trainyard's helper every N steps (rank 0 saves the model), as an elastic gang's
training does, so that a grow has a checkpoint to happen at.
"""

import time

STARTED = time.time()  # before anything else: when the launcher's new process began its work

import argparse  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--marks", required=True, help="folder for each rank's process-group lines")
    p.add_argument("--sleep-per-step", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=1_000_000)
    p.add_argument("--checkpoint-every", type=int, default=0, help="report a checkpoint every N steps (0: never)")
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(1)
    dist.all_reduce(t)
    now = time.time()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    attempt = os.environ.get("TRAINYARD_ATTEMPT", "?")
    os.makedirs(args.marks, exist_ok=True)
    with open(os.path.join(args.marks, f"rank-{rank}"), "a") as f:
        f.write(f"{attempt} {now:.6f} {ru.ru_utime + ru.ru_stime:.3f} {STARTED:.6f}\n")
    print(f"in the process group: attempt {attempt} rank {rank} of {int(t.item())}", flush=True)

    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randn(8, 1)
    for step in range(args.steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step}", flush=True)
        if args.checkpoint_every and step % args.checkpoint_every == args.checkpoint_every - 1:
            import trainyard

            folder = None
            if rank == 0:
                folder = trainyard.new_checkpoint_dir()
                torch.save(model.state_dict(), os.path.join(folder, "model.pt"))
            trainyard.report({"step": step}, checkpoint=folder)
        time.sleep(args.sleep_per_step)


if __name__ == "__main__":
    main()
