"""A tiny job for the end-to-end tests of the training API: no torch, only the helper.

Each iteration rank 0 writes a checkpoint folder with one file and every rank reports
metrics; an iteration resumes after the one in the latest checkpoint. With --shards every
rank also writes shard-<rank>.txt into a folder of its own and reports it, and on resuming
reads its own shard back.
"""

import argparse
import os

import trainyard


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--metric", default="loss", help="name of the reported metric")
    p.add_argument("--bad-metric", action="store_true", help="report a string metric")
    p.add_argument("--checkpoint-path", help="report this checkpoint path instead")
    p.add_argument("--bytes", type=int, default=1000, help="checkpoint file size")
    p.add_argument("--shards", action="store_true", help="every rank saves a shard")
    args = p.parse_args()
    ctx = trainyard.get_context()
    start = 1
    ckpt = trainyard.get_checkpoint()
    if ckpt:
        with open(os.path.join(ckpt, "state.txt")) as f:
            start = int(f.read().split()[0]) + 1
        print(f"resumed from {os.path.basename(ckpt)} at iteration {start}", flush=True)
        if args.shards:
            with open(os.path.join(ckpt, f"shard-{ctx.rank}.txt")) as f:
                print(f"rank {ctx.rank} read its shard: {f.read()}", flush=True)
    for i in range(start, args.iterations + 1):
        metrics = {args.metric: 1.0 / i, "iteration_seen": i}
        if args.bad_metric:
            metrics[args.metric] = "high"
        folder = None
        if args.shards:
            folder = trainyard.new_checkpoint_dir()
            with open(os.path.join(folder, f"shard-{ctx.rank}.txt"), "w") as f:
                f.write(f"rank {ctx.rank} iteration {i}")
        if ctx.rank == 0:
            folder = folder or args.checkpoint_path or trainyard.new_checkpoint_dir()
            if not args.checkpoint_path:
                with open(os.path.join(folder, "state.txt"), "w") as f:
                    f.write(f"{i} " + "x" * args.bytes)
        result = trainyard.report(metrics, checkpoint=folder)
        print(f"reported iteration {result.iteration} checkpoint {result.checkpoint}", flush=True)


if __name__ == "__main__":
    main()
