# Sourced by the GPU scripts (check.sh, restarts.sh) from the repository root: $1 names the
# log under $OUT (or /tmp/gpu-check). It unpacks the carried binaries, puts the dataset where
# Debian puts it, makes the compiled e2e tests find the repository at the path they were
# built from, and defines step and t.
set -u
root=$PWD
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
exec > >(tee "$out/$1") 2>&1

for f in .gpubin/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
chmod +x .gpubin/*
mkdir -p bin && cp .gpubin/trainyard bin/trainyard
export PATH=$root/bin:$PATH PYTHONUNBUFFERED=1
PY=$(command -v python3)
TR=$(command -v torchrun)
[ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || { mkdir -p /usr/share/datasets/fashion-mnist && cp .gpudata/*.gz /usr/share/datasets/fashion-mnist/; }
[ -e "${E2E_ROOT:-/work/main}" ] || { mkdir -p "$(dirname "${E2E_ROOT:-/work/main}")"; ln -s "$root" "${E2E_ROOT:-/work/main}"; }
R=/tmp/runs
step() { echo; echo "=== $(date +%T) $*"; }
t() { local s=$1; shift; timeout -k 5 "$s" "$@"; echo "exit $?"; }
