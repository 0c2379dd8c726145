#!/bin/bash
# GPU checks, run on the device machine from the repository root (see README.md beside this
# file for what to build and carry). Each step has its own time limit, so one that hangs costs
# only itself; everything is also written to $OUT/check.log when $OUT is set.
source test/gpu/setup.sh check.log

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
$PY -c 'import torch,sys; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "python", sys.version.split()[0], "gpu", torch.cuda.get_device_name(0))'
echo "python3=$PY torchrun=$TR cores=$(nproc)"
trainyard version
t 30 trainyard devices

step "our TCPStore against torch $($PY -c 'import torch; print(torch.__version__)')'s own client and process groups"
(cd internal/tcpstore && TRAINYARD_TEST_PYTHON=$PY t 120 "$root/.gpubin/tcpstore.test" -test.run Torch -test.v) | grep -E "^(---|ok|FAIL|PASS|exit)|client ok|all_reduce|Error|error" | head -20

step "NCCL training with the helper: trainyard run, 1 worker x 1 GPU"
time t 150 trainyard run --storage-path $R --name fm-gpu --workers 1 --gpus-per-worker 1 -- python3 examples/fashion-mnist/train.py --epochs 2
step "the same under torchrun $($PY -c 'import torch; print(torch.__version__)') (the helper on PYTHONPATH)"
time PYTHONPATH=$root/python t 150 "$TR" --nproc_per_node 1 examples/fashion-mnist/train.py --epochs 2 2>&1 | grep -vE "^\s*$" | tail -8

step "a Ray Train script with ScalingConfig(use_gpu=True)"
t 150 trainyard run --storage-path $R --name ray-driver -- python3 test/gpu/ray_use_gpu.py $R 2>&1 | grep -E "WORKER|DRIVER|trainyard:|Error|error" | head -20

step "checkpoint on preemption with NCCL on the GPU: SIGTERM in epoch 2, then the same command resumes there"
pre=(trainyard run --storage-path $R --name fm-pre --workers 1 --gpus-per-worker 1 --max-restarts 2 -- python3 examples/fashion-mnist/train.py --epochs 3 --sleep-per-step 0.02)
"${pre[@]}" > /tmp/pre.log 2>&1 &  # trainyard itself, so that the SIGTERM below reaches it
p=$!
for i in $(seq 1 900); do [ -d $R/fm-pre/checkpoint_000001 ] && break; sleep 0.1; done
sleep 1; kill -TERM $p; wait $p; echo "exit $?"
grep -E "preempted|SIGTERM|committed|trainyard:" /tmp/pre.log | tail -6
t 150 "${pre[@]}" 2>&1 | grep -E "resuming|epoch [0-9]/|trainyard:" | tail -6

step "the job server: a GPU job, then top, list, get, metrics and the dashboard while it runs"
mkdir -p /tmp/load && cp test/gpu/gpu_load.py /tmp/load/
trainyard server --state-dir /tmp/srv --storage-path /tmp/srv-runs > /tmp/server.log 2>&1 &
srv=$!
for i in $(seq 1 50); do trainyard list > /dev/null 2>&1 && break; sleep 0.2; done
(cd /tmp/load && t 30 trainyard submit --no-wait --name load --gpus-per-worker 1 -- python3 gpu_load.py 30)
for i in $(seq 1 100); do trainyard get load 2>/dev/null | grep -qi running && break; sleep 0.3; done
sleep 12
t 20 trainyard top node; t 20 trainyard top job load; t 20 trainyard list; t 20 trainyard get load | head -30
tok=$(cat ~/.config/trainyard/token)
curl -s -H "Authorization: Bearer $tok" http://127.0.0.1:8265/metrics | grep -E "^trainyard_gpu" | head -20
link=$(trainyard open --print 2>&1 | grep -o 'http[^ ]*' | head -1)
curl -s -c /tmp/cj -X POST -H "Origin: http://127.0.0.1:8265" --data "code=${link#*#code=}" http://127.0.0.1:8265/login -o /dev/null -w "sign-in %{http_code}\n"
curl -s -b /tmp/cj http://127.0.0.1:8265/machine/samples.json | tail -c 1200; echo
curl -s -b /tmp/cj http://127.0.0.1:8265/machine | grep -ioE "H200[^<]{0,60}|utiliz[^<]{0,60}" | head -5
curl -s -b /tmp/cj http://127.0.0.1:8265/jobs/load | grep -ioE "gpu[^<]{0,60}" | head -8
t 60 trainyard logs -f load | tail -3; t 10 trainyard get load | head -8
kill $srv; wait $srv 2>/dev/null; tail -5 /tmp/server.log

step "the rendezvous on torch 2.x: the launcher's store against rank 0 hosting it (rank 1's time)"
t 150 sh bench/rendezvous/run.sh bin/trainyard $PY 5

step "trainyard worker (the in-pod launcher) as the operator starts it, with 1 GPU and with none"
pod() { # GPUS CODE: run `trainyard worker` with a pod's environment
  JOB='{"apiVersion":"trainyard.dev/v1alpha1","kind":"TrainJob","metadata":{"name":"pod"},"spec":{"workers":1,"procsPerWorker":1,"resources":{"gpu":'$1'},"command":["python3","-c","'"$2"'"],"storagePath":"'$R'","runName":"pod-gpu-'$1'"}}'
  TRAINYARD_JOB="$JOB" TRAINYARD_ATTEMPT=1 JOB_COMPLETION_INDEX=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
    TRAINYARD_TERMINATION_LOG=/tmp/pod-$1.msg TRAINYARD_PROGRESS_ADDR=127.0.0.1:0 t 60 trainyard worker; cat /tmp/pod-$1.msg; echo
}
pod 1 'import os,torch; print(\"CVD=[%s] count=%d\" % (os.environ[\"CUDA_VISIBLE_DEVICES\"], torch.cuda.device_count()))'
NVIDIA_VISIBLE_DEVICES=void pod 0 'import torch; print(\"cuda_available=%s\" % torch.cuda.is_available())'
(cd internal/device && t 60 "$root/.gpubin/device.test" -test.run RealGPU -test.v) | tail -4

step "the Python helper's and ray package's unit tests on torch 2.x"
(cd python && PYTHONPATH=.:compat t 240 $PY -m unittest discover -s tests -t . 2>&1 | tail -12)

step "bench/launch: trainyard run against torchrun on torch 2.x (2 CPU ranks, gloo)"
t ${BENCH_TIMEOUT:-200} .gpubin/launch -trainyard bin/trainyard -python $PY -torchrun "$TR" -rounds ${ROUNDS:-4} -timeout 60s -markdown "$out/launch.md" 2>&1 | tail -30

step "end-to-end tests on torch 2.x: preemption, elastic gangs, restarts, Ray"
(cd test/e2e && TRAINYARD_BIN=$root/bin/trainyard TRAINYARD_PYTHON=$PY t ${E2E_TIMEOUT:-170} "$root/.gpubin/e2e.test" -test.v -test.timeout 600s \
  -test.run "${E2E:-TestCheckpointOnPreemption$|TestElasticGang$|TestKilledWorkerRestartsGang$|TestResumeAfterKilledRank$|TestRayDriverRestartsFromCheckpoint$|TestRayTrainScriptInAGang$|TestRayQuickstartShardedCheckpoints$|TestServerPreemptsLowerPriority$}") |
  grep -E "^(=== RUN|\s*--- |ok|FAIL|PASS|exit)|_test.go:[0-9]+:" | head -60
step done
