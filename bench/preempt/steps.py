"""Training stand-in for bench/preempt: fixed-length steps, a checkpoint every N of them.

Run by bench/preempt under ``trainyard run --workers 2``. Standard library only. Every rank
takes ``--steps`` steps of ``--step-ms`` milliseconds each (a sleep) and, every ``--every``
steps, saves a checkpoint: rank 0 writes the step number into a folder made with
``trainyard.new_checkpoint_dir()`` and every rank calls ``trainyard.report()`` (rank 0
with the folder, the others with None), so all ranks report at the same points.

With ``--check-notice`` every rank also calls ``trainyard.preemption()`` after every
step (a failed open(2) while there is no notice); at the notice it saves and reports the
step it reached, once, then keeps stepping until the launcher stops it. Without it the
script never looks at the notice.

Rank 0 overwrites ``--progress`` with the number of the last step it completed, in place
(one pwrite(2) of a fixed-width number per step), so the benchmark reads the step the
gang reached after it was stopped, whatever killed it.
"""

import argparse
import os
import time

import trainyard

WIDTH = 12  # digits of the progress number, written in place


def parse_args():
    """Parse the command-line flags."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100_000, help="steps to take")
    p.add_argument("--step-ms", type=float, default=10.0, help="duration of a step (a sleep)")
    p.add_argument("--every", type=int, default=500, help="save a checkpoint every this many steps")
    p.add_argument("--check-notice", action="store_true", help="check trainyard.preemption() every step")
    p.add_argument("--progress", required=True, help="file rank 0 writes its last completed step to")
    return p.parse_args()


def save(rank, step):
    """Save and report a checkpoint of step; every rank calls it at the same points."""
    folder = None
    if rank == 0:
        folder = trainyard.new_checkpoint_dir()
        with open(os.path.join(folder, "step"), "w") as f:
            f.write(f"{step}\n")
    trainyard.report({"step": step}, checkpoint=folder)


def main():
    """Take the steps, saving every --every steps and, with --check-notice, at the notice."""
    args = parse_args()
    rank = trainyard.get_context().rank
    progress = None
    if rank == 0:
        progress = os.open(args.progress, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    step_s = args.step_ms / 1000
    noticed = False
    for step in range(1, args.steps + 1):
        time.sleep(step_s)
        if progress is not None:
            os.pwrite(progress, b"%*d\n" % (WIDTH, step), 0)
        if args.check_notice and not noticed and trainyard.preemption() is not None:
            noticed = True
            save(rank, step)
        elif step % args.every == 0:
            save(rank, step)


if __name__ == "__main__":
    main()
