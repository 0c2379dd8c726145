#!/bin/bash
# Restarts on torch 2.x and a GPU (issue 22, part 2), run on the device machine from the
# repository root with .gpubin (trainyard, launcher.test, launch; gzipped) and .gpudata
# carried (README.md beside this file): a restart on a spare under NCCL, the launcher's
# spare test on torch 2.x, and bench/launch's restart trials against torchrun 2.x, with
# the output of a torchrun restart trial that fails. Everything goes to $OUT/restarts.log.
source test/gpu/setup.sh restarts.log
pidOf() { # RUN RANK: the pid of a rank of the run's latest attempt, from run.json
  $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["attempts"][-1]["ranks"][int(sys.argv[2])]["pid"])' "$R/$1/run.json" "$2"
}
ranks() { # RUN: each attempt's ranks as (rank, pid, prestarted)
  $PY -c 'import json,sys; r=json.load(open(sys.argv[1]))
for a in r["attempts"]: print("attempt", a["number"], [(k["rank"], k.get("pid"), k.get("prestarted", False)) for k in a["ranks"]])' "$R/$1/run.json"
}

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c 'import torch,sys; print("torch", torch.__version__, "python", sys.version.split()[0])'
echo "python3=$PY torchrun=$TR cores=$(nproc)"; trainyard version
for i in 1 2 3; do /usr/bin/time -f "import torch: %e s" $PY -c "import torch"; done

step "a restart on a spare with NCCL: rank 0 SIGKILLed after checkpoint 1, attempt 2 on its spare"
run=(trainyard run --storage-path $R --name fm-spare --workers 1 --gpus-per-worker 1 --max-restarts 1 -- python3 examples/fashion-mnist/train.py --epochs 3 --sleep-per-step 0.005)
"${run[@]}" > /tmp/spare.log 2>&1 &
p=$!
for i in $(seq 1 600); do [ -d $R/fm-spare/checkpoint_000001 ] && break; sleep 0.2; done
sleep 3
ps -eo pid,rss,args | grep -E "spare Python|train.py" | grep -v grep | cut -c1-140
kill -KILL "$(pidOf fm-spare 0)"
( sleep 120; kill $p 2>/dev/null ) & w=$!
wait $p; echo "exit $?"; kill $w 2>/dev/null
grep -E "trainyard:|backend|resuming|accuracy" /tmp/spare.log | tail -12
ranks fm-spare
echo "spares left: $(pgrep -fc 'spare Python')"

step "the launcher's spare test on torch $($PY -c 'import torch; print(torch.__version__)')"
(cd internal/launcher && TRAINYARD_TEST_PYTHON=$PY t 120 "$root/.gpubin/launcher.test" -test.run 'TestRestartRunsOnSpares|TestSpareFits|TestParsePython' -test.v) | grep -E "^(---|ok|FAIL|PASS)|^\s+---|exit" | head -20

step "one torchrun restart trial with its static rendezvous (--master_port), kept with its logs"
t 100 .gpubin/launch -trainyard bin/trainyard -python "$PY" -torchrun "$TR" -rounds 1 -warmup 0 -kinds restart -timeout 60s -keep 2>&1 | tee /tmp/b1.log | grep -E "^round|FAILED|kept"
for d in /tmp/trainyard-bench-*/r1-torchrun-restart-*; do
  echo "--- $d"; for f in $(find "$d" -type f -name '*.log' | head -8); do echo "## $f"; tail -c 1500 "$f"; echo; done
done
rd=static; grep -qE "torchrun +restart +FAILED" /tmp/b1.log && rd=c10d
rm -rf /tmp/trainyard-bench-*

step "bench/launch restart trials against torchrun 2.x (rendezvous $rd)"
t 330 .gpubin/launch -trainyard bin/trainyard -python "$PY" -torchrun "$TR" -rounds 4 -warmup 1 -kinds restart -timeout 80s -torchrun-rdzv $rd -markdown "$out/launch.md"
for d in /tmp/trainyard-bench-*/*; do [ -d "$d" ] && { echo "--- kept $d"; tail -c 800 "$d/stderr.log"; echo; }; done
step "done"
