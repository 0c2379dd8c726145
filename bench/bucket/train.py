"""The step-time workload of bench/bucket: a model of about --mib MiB trained on CPU, a
checkpoint every --every steps (torch.save into a folder handed to report()), and a line
"step N time S" per step. --mode none reports without checkpoints; async hands the
checkpoint over and goes on; sync then waits until the uploader recorded the checkpoint's
upload (the run folder's .trainyard-uploads.json), as Ray's report() does with
checkpoint_upload_mode SYNC."""

import argparse
import json
import os
import time

import torch
import trainyard

p = argparse.ArgumentParser()
p.add_argument("--mib", type=int, default=1024)
p.add_argument("--steps", type=int, default=40)
p.add_argument("--every", type=int, default=10)
p.add_argument("--mode", choices=["none", "async", "sync"], default="async")
args = p.parse_args()

torch.set_num_threads(2)
side = int((args.mib * 2**20 / 4) ** 0.5)
model = torch.nn.Linear(side, side, bias=False)
opt = torch.optim.SGD(model.parameters(), lr=1e-6)
x = torch.randn(16, side)
status = os.path.join(os.environ["TRAINYARD_RUN_DIR"], ".trainyard-uploads.json")


def uploaded() -> int:
    try:
        with open(status, encoding="utf-8") as f:
            return int(json.load(f).get("uploaded") or 0)
    except (OSError, ValueError):
        return 0


last = time.perf_counter()
for step in range(1, args.steps + 1):
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
    if args.mode != "none" and step % args.every == 0:
        folder = trainyard.new_checkpoint_dir()
        torch.save(model.state_dict(), os.path.join(folder, "model.pt"))
        res = trainyard.report({"step": step}, checkpoint=folder)
        if args.mode == "sync":
            index = int(res.checkpoint.rsplit("_", 1)[1])
            while uploaded() < index:
                time.sleep(0.05)
    else:
        trainyard.report({"step": step})
    now = time.perf_counter()
    print(f"step {step} time {now - last:.4f}", flush=True)
    last = now
