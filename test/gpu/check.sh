#!/bin/bash
# GPU checks for issues 2, 3 and 5; run on the device machine from the repo root.
export PATH=$PWD/bin:$PATH
R=/tmp/runs
step() { echo; echo "=== $*"; }
step version; trainyard version; nvidia-smi -L; python3 -c 'import torch,sys; print("torch", torch.__version__, "python", sys.version.split()[0])'
step devices; trainyard devices; trainyard devices -o json | head -20
step "devices with CUDA_VISIBLE_DEVICES= (hidden)"; CUDA_VISIBLE_DEVICES= trainyard devices
step "1 worker x 1 GPU"; trainyard run --storage-path $R --workers 1 --gpus-per-worker 1 -- python3 -c 'import os,torch; print("CVD=[%s] order=%s count=%d name=%s" % (os.environ["CUDA_VISIBLE_DEVICES"], os.environ.get("CUDA_DEVICE_ORDER"), torch.cuda.device_count(), torch.cuda.get_device_name(0)))'; echo "exit $?"
step "2 workers x 1 GPU on a 1-GPU machine"; trainyard run --storage-path $R --workers 2 --gpus-per-worker 1 -- true; echo "exit $?"
step "workers without GPUs"; trainyard run --storage-path $R --workers 2 -- python3 -c 'import os,torch; print("CVD=[%s] NVD=%s cuda_available=%s" % (os.environ["CUDA_VISIBLE_DEVICES"], os.environ["NVIDIA_VISIBLE_DEVICES"], torch.cuda.is_available()))'; echo "exit $?"
step "NCCL training with the helper (1 worker, 1 GPU, torch 2.x)"; trainyard run --storage-path $R --name fm-gpu --workers 1 --gpus-per-worker 1 -- python3 examples/fashion-mnist/train.py --epochs 3 --data-dir ${DATA:-.gpudata}; echo "exit $?"
step "2 gloo ranks on CPU with torch 2.x: kill rank 1 after checkpoint 1, resume"
( trainyard run --storage-path $R --name fm-cpu --workers 2 --max-restarts 1 -- python3 examples/fashion-mnist/train.py --epochs 3 --train-subset 12000 --test-subset 2000 --data-dir ${DATA:-.gpudata} > /tmp/cpu.log 2>&1; echo "exit $?" >> /tmp/cpu.log ) &
for i in $(seq 1 600); do [ -d $R/fm-cpu/checkpoint_000001 ] && break; sleep 0.2; done
pid=$(python3 -c "import json; print(json.load(open('$R/fm-cpu/run.json'))['attempts'][0]['ranks'][1]['pid'])"); kill -9 $pid; wait; grep -v "first step" /tmp/cpu.log | tail -20
step "TensorBoard's own reader on the run folders"
for d in $R/fm-gpu $R/fm-cpu; do python3 -c "import sys; from tensorboard.backend.event_processing.event_accumulator import EventAccumulator; a = EventAccumulator(sys.argv[1], size_guidance={'scalars': 0}); a.Reload(); [print(t, [(e.step, round(e.value, 4)) for e in a.Scalars(t)]) for t in a.Tags()['scalars']]" $d; done
step "device package test on the real GPU"; ${DEVICE_TEST:-.gpubin/device.test} -test.run RealGPU -test.v 2>&1 | tail -5
step "results"; trainyard results --storage-path $R fm-gpu
# Issue 5: the in-pod launcher as the operator starts it in a pod with 1 GPU (and one without).
pod() { # GPUS CODE: run `trainyard worker` with a pod's environment
  JOB='{"apiVersion":"trainyard.dev/v1alpha1","kind":"TrainJob","metadata":{"name":"pod"},"spec":{"workers":1,"procsPerWorker":1,"resources":{"gpu":'$1'},"command":["python3","-c","'"$2"'"],"storagePath":"'$R'","runName":"pod-gpu-'$1'"}}'
  TRAINYARD_JOB="$JOB" TRAINYARD_ATTEMPT=1 JOB_COMPLETION_INDEX=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
    TRAINYARD_TERMINATION_LOG=/tmp/pod-$1.msg TRAINYARD_PROGRESS_ADDR=127.0.0.1:0 trainyard worker; echo "exit $?"; cat /tmp/pod-$1.msg; echo
}
step "trainyard worker, 1 GPU"; pod 1 'import os,torch; print(\"CVD=[%s] count=%d\" % (os.environ[\"CUDA_VISIBLE_DEVICES\"], torch.cuda.device_count()))'
step "trainyard worker, no GPU (the operator sets NVIDIA_VISIBLE_DEVICES=void)"; NVIDIA_VISIBLE_DEVICES=void pod 0 'import torch; print(\"cuda_available=%s\" % torch.cuda.is_available())'
