"""Every rank saves a shard of its own with each report; rank 1 fails twice.

Attempt 1: both ranks report iterations 1 and 2, then rank 1 exits 1. Attempt 2 resumes,
rank 0 reports iteration 3 with its shard, and rank 1 exits 1 before its first report of
the attempt (once rank 0 has reported: it waits for the file argv[1]). Attempt 3 resumes:
every rank reads its own shard, so a checkpoint committed with rank 0's part alone fails
it; then both train to iteration 4.
"""

import os
import sys
import time

import trainyard

ctx = trainyard.get_context()
attempt = int(os.environ["TRAINYARD_ATTEMPT"])
signal = sys.argv[1]
start = 1
ckpt = trainyard.get_checkpoint()
if ckpt:
    with open(os.path.join(ckpt, f"shard-{ctx.rank}.txt")) as f:
        start = int(f.read()) + 1
    print(f"rank {ctx.rank} attempt {attempt}: resumed from {os.path.basename(ckpt)} at iteration {start}", flush=True)
if attempt == 2 and ctx.rank == 1:
    while not os.path.exists(signal):
        time.sleep(0.05)
    sys.exit(1)  # before its first report of the resumed attempt
for i in range(start, 5):
    folder = trainyard.new_checkpoint_dir()
    with open(os.path.join(folder, f"shard-{ctx.rank}.txt"), "w") as f:
        f.write(str(i))
    trainyard.report({"i": i}, checkpoint=folder)
    if attempt == 2 and ctx.rank == 0:
        open(signal, "w").close()
        time.sleep(120)  # until the launcher stops it
    if attempt == 1 and ctx.rank == 1 and i == 2:
        sys.exit(1)
print(f"rank {ctx.rank} done", flush=True)
