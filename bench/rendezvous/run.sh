#!/bin/sh
# Usage: bench/rendezvous/run.sh [TRAINYARD] [PYTHON] [ROUNDS]
# Alternates `trainyard run --workers 2` of rdv.py with the launcher's store ("hosted") and
# with rank 0 hosting it ("rank0"), and prints each rank's rendezvous time.
set -eu
ty=${1:-./bin/trainyard}
py=${2:-/usr/bin/python3}
rounds=${3:-6}
here=$(cd "$(dirname "$0")" && pwd)
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
i=1
while [ "$i" -le "$rounds" ]; do
  for mode in hosted rank0; do
    set --
    [ "$mode" = rank0 ] && set -- --env TORCHELASTIC_USE_AGENT_STORE=False
    "$ty" run --workers 2 --storage-path "$runs" --name "r$i-$mode" "$@" -- "$py" "$here/rdv.py" 2>&1 |
      grep -o 'RDV.*' | sed "s/^/round $i $mode /"
  done
  i=$((i + 1))
done
