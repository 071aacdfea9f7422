#!/usr/bin/env bash
# Issue 31's long runs, one process and one thread at a time, each resumable: run this again
# after an interruption and it skips every (variant, seed) already stored. Interleaved by seed so
# that a partial run covers every variant once before any twice. Hours on a 2-core CPU:
#   setsid nohup nice -n 19 bash benchmarks/lra_runs.sh > benchmarks/lra_runs.log 2>&1 &
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
N512="--n-train 16384 --steps 1000 --batch-size 32 --schedule warmup_cosine --warmup 0.1"
for seed in 0 1 2; do
    "$PY" benchmarks/listops.py --seeds "$seed" || echo "listops seed $seed: exit $?"
    if [ "$seed" != 0 ]; then
        "$PY" benchmarks/long_range.py $N512 --model-seeds "$seed" --plot /dev/null \
            || echo "long_range seed $seed: exit $?"
    fi
done
"$PY" benchmarks/listops.py --plot-only --plot benchmarks/listops.png
