"""An elastic gang's worker for the resize tests and bench/resize: DDP (gloo) on a tiny
model, STEPS steps of STEP_S seconds, a checkpoint every CKPT_EVERY steps and at the
preemption notice; each step's line says the world size, so a test sees the gang
change size."""

import os
import time

import torch
import torch.distributed as dist
import trainyard

steps = int(os.environ.get("STEPS", "40"))
step_s = float(os.environ.get("STEP_S", "0.2"))
every = int(os.environ.get("CKPT_EVERY", "5"))

trainyard.init_process_group()
ctx = trainyard.get_context()
net = torch.nn.Linear(4, 1)
model = trainyard.prepare_model(net)  # not wrapped in a world of 1
opt = torch.optim.SGD(model.parameters(), lr=0.1)
start = 0
if (ckpt := trainyard.get_checkpoint()) is not None:
    state = torch.load(os.path.join(ckpt, "state.pt"))
    net.load_state_dict(state["model"])
    start = state["step"] + 1
print(f"rank {ctx.rank} world {ctx.world_size} previous {ctx.previous_world_size} "
      f"elastic {ctx.min_workers}:{ctx.max_workers} from step {start}", flush=True)


def save(step):
    folder = None
    if ctx.rank == 0:
        folder = trainyard.new_checkpoint_dir()
        torch.save({"model": net.state_dict(), "step": step}, os.path.join(folder, "state.pt"))
    trainyard.report({"step": step, "world": ctx.world_size}, checkpoint=folder)


for step in range(start, steps):
    loss = model(torch.ones(2, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(step_s)
    if ctx.rank == 0:
        print(f"step {step} world {ctx.world_size} at {time.time():.3f}", flush=True)
    # every rank agrees on whether to save: rank 0's view of the notice decides
    flag = torch.tensor([1 if trainyard.preemption() is not None else 0])
    dist.broadcast(flag, 0)
    if flag.item() or (step + 1) % every == 0:
        save(step)
        if flag.item():
            print(f"saved at step {step} on the notice", flush=True)
            time.sleep(60)  # the launcher stops the gang once the checkpoint is committed
dist.destroy_process_group()
print(f"rank {ctx.rank} done in a world of {ctx.world_size}", flush=True)
