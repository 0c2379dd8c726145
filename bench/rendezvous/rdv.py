"""Time torch.distributed's env:// rendezvous alone, after torch is imported.

Each rank prints how long init_process_group("gloo") and one all_reduce took. Started
twice by bench/rendezvous/run.sh: with the launcher's store (every rank a client) and
with rank 0 hosting it (TORCHELASTIC_USE_AGENT_STORE=False), where a rank that connects
before rank 0 listens waits for the TCPStore client's 1-second retry.
"""
import os
import time

import torch
import torch.distributed as dist

start = time.time()
dist.init_process_group("gloo", init_method="env://")
x = torch.ones(1)
dist.all_reduce(x)
print(f"RDV rank={os.environ['RANK']} init+allreduce={time.time() - start:.3f}s "
      f"agent_store={os.environ.get('TORCHELASTIC_USE_AGENT_STORE')}", flush=True)
