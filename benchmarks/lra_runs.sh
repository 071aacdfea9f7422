#!/usr/bin/env bash
# Issue 31's long runs, one process and one thread at a time, each resumable: run this again
# after an interruption and it skips every (variant, seed) already stored. Interleaved by seed so
# that a partial run covers every variant once before any twice. Hours on a 2-core CPU:
#   setsid nohup nice -n 19 bash benchmarks/lra_runs.sh > benchmarks/lra_runs.log 2>&1 &
# (WAIT_FOR=<pid> first waits for that process to end, e.g. a run of this chain left running.)
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
if [ -n "${WAIT_FOR:-}" ]; then
    while kill -0 "$WAIT_FOR" 2>/dev/null; do sleep 30; done
fi
# The stored N = 512 picture's settings (benchmarks/README.md).
N512="--n-train 16384 --steps 1000 --batch-size 32 --schedule warmup_cosine --warmup 0.1"
ON_QUERY="--json benchmarks/long_range_global_on_query.json --only LongformerOnQuery BigBirdOnQuery"
for seed in 0 1 2; do
    "$PY" benchmarks/listops.py --seeds "$seed" || echo "listops seed $seed: exit $?"
    if [ "$seed" = 0 ]; then
        "$PY" benchmarks/long_range.py $N512 --resume $ON_QUERY --plot /dev/null \
            || echo "long_range on the query, seed 0: exit $?"
    else
        "$PY" benchmarks/long_range.py $N512 $ON_QUERY --model-seeds "$seed" --plot /dev/null \
            || echo "long_range on the query, seed $seed: exit $?"
        "$PY" benchmarks/long_range.py $N512 --model-seeds "$seed" --plot /dev/null \
            || echo "long_range seed $seed: exit $?"
    fi
done
# 4x the steps at N = 512 for the models at chance that compare the query with content (and FNet,
# blind to the keys, as a control): optimisation or not (07 section 7, issue 31).
"$PY" benchmarks/long_range.py --n-train 16384 --steps 4000 --batch-size 32 --schedule warmup_cosine \
    --warmup 0.1 --resume --only LinearAttention CompressedAttention FourierMixing LinformerAttention \
    --json benchmarks/long_range_budget_4x.json --plot /dev/null || echo "4x budget: exit $?"
# The same two content-comparing models swept over N with the stored sweep's budget: where they stop
# learning.
"$PY" benchmarks/long_range.py --sweep --resume --tasks binding --seq-lens 64 128 256 --seeds 0 1 2 \
    --steps 1024 --batch-size 32 --n-train 2048 --schedule warmup_cosine --warmup 0.1 \
    --variants "compressed (conv)" "linear (elu+1)" --sweep-json benchmarks/long_range_sweep_content.json \
    || echo "content sweep: exit $?"
# The sweep's input-independent models with 4x the steps and 8x the data (review s4, N6).
"$PY" benchmarks/long_range.py --sweep --resume --tasks binding --seq-lens 64 256 --seeds 0 1 2 \
    --steps 4096 --batch-size 32 --n-train 16384 --schedule warmup_cosine --warmup 0.1 \
    --sweep-json benchmarks/long_range_sweep_4x.json || echo "4x sweep: exit $?"
"$PY" benchmarks/listops.py --plot-only --plot benchmarks/listops.png
