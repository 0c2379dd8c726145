"""Keeps the GPU busy for SECONDS (default 20) with bf16 matrix products, reporting each second."""
import sys, time
import torch
import trainyard

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end, step = time.time() + seconds, 0
while time.time() < end:
    t = time.time()
    while time.time() - t < 1:
        for _ in range(20):
            a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()
    step += 1
    trainyard.report({"step": step, "mem_gib": torch.cuda.memory_allocated() / 2**30})
print("gpu_load done", step)
