"""bench/resize's training script: DDP (gloo) on a tiny model, steps of STEP_S seconds, a
checkpoint (trainyard's helper) every CKPT_EVERY steps and at the preemption notice. Rank
0 prints "step S world W at T" (T: time.time()) after each step; every rank prints "rank
R world W from step S" when it starts. While the file LOST exists, rank 2 exits at once:
its machine is gone, it cannot come back. Under torchrun (CKPT_DIR set) rank 0 keeps its
own checkpoint, CKPT_DIR/state.pt, as torchrun users do, and every rank resumes from it."""

import os
import sys
import time

import torch
import torch.distributed as dist
import trainyard

step_s = float(os.environ.get("STEP_S", "0.2"))
every = int(os.environ.get("CKPT_EVERY", "5"))
lost = os.environ.get("LOST", "")
own = os.path.join(os.environ["CKPT_DIR"], "state.pt") if os.environ.get("CKPT_DIR") else ""

if os.environ.get("RANK") == "2" and lost and os.path.exists(lost):
    print("rank 2: lost", flush=True)  # before the rendezvous: the failure is rank 2's
    sys.exit(1)
trainyard.init_process_group()
ctx = trainyard.get_context()
net = torch.nn.Linear(64, 1)
model = trainyard.prepare_model(net)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
start = 0
path = own if own and os.path.exists(own) else ""
if not own and (ckpt := trainyard.get_checkpoint()) is not None:
    path = os.path.join(ckpt, "state.pt")
if path:
    state = torch.load(path)
    net.load_state_dict(state["model"])
    start = state["step"] + 1
print(f"rank {ctx.rank} world {ctx.world_size} from step {start}", flush=True)


def save(step):
    if own:
        if ctx.rank == 0:
            torch.save({"model": net.state_dict(), "step": step}, own + ".tmp")
            os.replace(own + ".tmp", own)
        return
    folder = None
    if ctx.rank == 0:
        folder = trainyard.new_checkpoint_dir()
        torch.save({"model": net.state_dict(), "step": step}, os.path.join(folder, "state.pt"))
    trainyard.report({"step": step, "world": ctx.world_size}, checkpoint=folder)


step = start
while True:
    loss = model(torch.ones(8, 64)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(step_s)
    if ctx.rank == 0:
        print(f"step {step} world {ctx.world_size} at {time.time():.3f}", flush=True)
    flag = torch.tensor([1 if trainyard.preemption() is not None else 0])
    dist.broadcast(flag, 0)
    if flag.item() or (step + 1) % every == 0:
        save(step)
        if flag.item():
            time.sleep(60)  # the launcher stops the gang once the checkpoint is committed
    step += 1
