"""An elastic gang's worker for TestElasticGang: DDP (gloo) on a tiny model, a checkpoint
per step; the worker of rank 2 in a world of 3 dies at its third step every time (a
broken GPU), so the gang must go on without it."""

import os
import sys
import time

import torch
import torch.distributed as dist
import trainyard

trainyard.init_process_group()
ctx = trainyard.get_context()
model = trainyard.prepare_model(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
start = 0
if (ckpt := trainyard.get_checkpoint()) is not None:
    state = torch.load(os.path.join(ckpt, "state.pt"))
    model.module.load_state_dict(state["model"])
    start = state["step"] + 1
print(f"rank {ctx.rank} world {ctx.world_size} previous {ctx.previous_world_size} "
      f"elastic {ctx.min_workers}:{ctx.max_workers} attempt {ctx.attempt} from step {start}", flush=True)
for step in range(start, 8):
    if ctx.rank == 2 and ctx.world_size == 3 and step == 2:
        sys.exit(7)
    loss = model(torch.ones(2, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    folder = None
    if ctx.rank == 0:
        folder = trainyard.new_checkpoint_dir()
        torch.save({"model": model.module.state_dict(), "step": step}, os.path.join(folder, "state.pt"))
    trainyard.report({"step": step}, checkpoint=folder)
    time.sleep(0.1)
dist.destroy_process_group()
print(f"rank {ctx.rank} done in a world of {ctx.world_size}", flush=True)
