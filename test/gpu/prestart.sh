#!/bin/bash
# A launch on Pythons the job server kept warm, on torch 2.x and a GPU (issue 22, part 2),
# run on the device machine from the repository root with .gpubin (trainyard and launch;
# gzipped) and .gpudata carried (README.md beside this file): whether CUDA reads
# CUDA_VISIBLE_DEVICES at its start rather than at `import torch` (what lets a standby's
# Python run a rank on other GPUs), a second NCCL job on the standby's Python, and
# bench/launch -server against torchrun 2.x. Everything goes to $OUT/prestart.log.
source test/gpu/setup.sh prestart.log

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c 'import torch,sys; print("torch", torch.__version__, "python", sys.version.split()[0])'
echo "python3=$PY torchrun=$TR cores=$(nproc)"; trainyard version

step "the GPUs a process sees, set after import torch"
CUDA_VISIBLE_DEVICES= $PY -c 'import os, torch
os.environ["CUDA_VISIBLE_DEVICES"] = "0"
print("imported with none, then 0:", torch.cuda.device_count(), "GPU(s)", torch.cuda.get_device_name(0) if torch.cuda.device_count() else "")'
CUDA_VISIBLE_DEVICES=0 $PY -c 'import os, torch
os.environ["CUDA_VISIBLE_DEVICES"] = ""
print("imported with 0, then none:", torch.cuda.device_count(), "GPU(s)")'

step "two NCCL jobs on a server with --prestart: the second on the standby's Python"
export TRAINYARD_TOKEN_FILE=/tmp/ps/token
mkdir -p /tmp/ps && cd /tmp/ps
trainyard server --address 127.0.0.1:8399 --state-dir /tmp/ps/state --storage-path /tmp/ps/runs --prestart > /tmp/ps/server.log 2>&1 &
srv=$!
sleep 3
job=(trainyard submit --address http://127.0.0.1:8399 --workers 1 --gpus-per-worker 1 -- python3 "$root/examples/fashion-mnist/train.py" --epochs 1)
t 120 "${job[@]}" | grep -E "trainyard:|backend|accuracy" | tail -6
for i in $(seq 1 60); do [ "$(pgrep -fc 'spare Python')" -ge 1 ] && break; sleep 1; done
sleep 8
ps -eo pid,ppid,rss,args | grep -E "spare Python|--standby" | grep -v grep | cut -c1-140
t 120 "${job[@]}" | grep -E "trainyard:|backend|accuracy|afresh" | tail -8
grep -E "standby|handed" /tmp/ps/server.log | cut -c1-200
kill $srv; wait $srv; cd "$root"

step "bench/launch -server against torchrun 2.x: launch to the first step"
t 330 .gpubin/launch -trainyard bin/trainyard -python "$PY" -torchrun "$TR" -rounds 4 -warmup 1 -kinds run -server -timeout 80s -markdown "$out/launch-server.md"
step "done"
