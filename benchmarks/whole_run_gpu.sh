#!/usr/bin/env bash
# DLA's and MULTR's whole runs at 10,000 ranker steps on the 1/10 Yahoo shape, on CUDA, in one call: the pair of
# docs/scale.md's goal ("MULTR's whole run within 1.5x of DLA's"), with interleaved per-step ratios beside it.
#
#   benchmarks/whole_run_gpu.sh OUT_DIR           # on a CUDA machine: ends within $BUDGET_S seconds (default 510)
#   benchmarks/whole_run_gpu.sh --tiny OUT_DIR    # the same path on CPU: a few queries, 2 steps (checks the script)
#
# 1. In the background, on the GPU (interleaved, one process each): benchmarks/step_time.py (a ranker step of DLA
#    and of MULTR sampled and expected at sample_num 8, the simulator's training step, the expected pass per 1,000
#    lists), then benchmarks/propensity_ranker_cost.py at 700 features (propensity_update_every 1, 2, 4;
#    examination_ranker_layers [64]).
#    Meanwhile, on the CPU: benchmarks/scale.py --prepare-only writes the set (2,000 / 200 / 200 queries, 12-36
#    documents, 700 features) and fills the check and feature caches, so that both runs start as later starts.
# 2. Then benchmarks/scale.py runs ULTRA's main.py for multr_default (MULTR's defaults: the simulator stopped by
#    its held-out curve, capped at 10,000 steps; imputation=expected) and then dla, --steps 10000, device=cuda,
#    within what is left of BUDGET_S; a run still going then is stopped and reported with its phases so far and
#    its step time over the steps it logged.  MULTR goes first so that its one-off phases, the unknowns, are
#    measured whole; a stopped DLA's steps (all alike) project reliably.
#
# Writes to OUT_DIR (7 files): run.log (this script's output), whole_run.md (the table: section "Whole runs as
# measured"), whole_run.csv, dla.log and multr_default.log (the runs' output, timestamped), step_time.log,
# propensity_ranker_cost.md.  Needs torch and ULTRA importable (as example/gpu_check.sh); the data and model dirs go
# to $WHOLE_RUN_WORK (default: a new temporary folder; about 1 GB); a set already there (an earlier call's, e.g. prepared
# with scale.py --prepare-only beside gpu_check.sh) is reused and said so.
set -uo pipefail

TINY=0
if [ "${1:-}" = "--tiny" ]; then
    TINY=1
    shift
fi
if [ $# -ne 1 ]; then
    echo "usage: $0 [--tiny] OUT_DIR" >&2
    exit 2
fi
START=$SECONDS
BUDGET_S="${BUDGET_S:-510}"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$1" || exit 2
OUT="$(cd "$1" && pwd)"
WORK="${WHOLE_RUN_WORK:-$(mktemp -d)}"
mkdir -p "$WORK" || exit 2
PYTHON="${PYTHON:-python}"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
# shellcheck source=../example/startup_hook.sh
. "$REPO/example/startup_hook.sh"  # ultra_multr's start-up hook (compact reader, early checks) without a pip install
use_startup_hook "$WORK/site" || exit 2

exec > >(tee "$OUT/run.log") 2>&1
echo "whole_run_gpu.sh on $(hostname), $(date -u), budget ${BUDGET_S} s, work dir $WORK"
"$PYTHON" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
(cd "$REPO" && git rev-parse HEAD 2>/dev/null) || true

if [ "$TINY" = 1 ]; then
    DEVICE=cpu
    PREPARE=(--tiny)
    PAIR=(--tiny)
    STEP_TIME=(--steps 2 --warmup 1 --batch-size 32 --features 46 --samples 4 --expected-samples 4)
    COST=(--queries 20 --features 6 --batch-size 8 --steps 12 --layers 16)
else
    "$PYTHON" -c "import torch; assert torch.cuda.is_available(), 'CUDA is not available (--tiny runs on CPU)'" || exit 2
    DEVICE=cuda
    PREPARE=(--generate 2000 --features 700)
    if [ -e "$WORK/data/settings.json" ]; then  # written by an earlier call with the same WHOLE_RUN_WORK
        PREPARE=()
        echo "reusing the set in $WORK/data ($(wc -l < "$WORK/data/train/train.init_list") training queries)"
    fi
    PAIR=(--steps 10000)
    STEP_TIME=(--steps 20 --samples 8 --expected-samples 8)
    COST=(--features 700 --steps 88 --layers 64)
fi

(
    timeout 90 "$PYTHON" "$REPO/benchmarks/step_time.py" --device "$DEVICE" "${STEP_TIME[@]}" > "$OUT/step_time.log" 2>&1
    echo "step_time.py exit $? at $((SECONDS - START)) s"
    timeout 90 "$PYTHON" "$REPO/benchmarks/propensity_ranker_cost.py" --device "$DEVICE" --every 1 2 4 "${COST[@]}" \
        --out "$OUT/propensity_ranker_cost.md" > /dev/null 2>&1
    echo "propensity_ranker_cost.py exit $? at $((SECONDS - START)) s"
) &
BACKGROUND=$!
"$PYTHON" "$REPO/benchmarks/scale.py" --data "$WORK/data" --workdir "$WORK" --prepare-only "${PREPARE[@]}" || exit 1
echo "data and caches ready at $((SECONDS - START)) s"
wait "$BACKGROUND"

LEFT=$((BUDGET_S - (SECONDS - START) - 15))  # 15 s for the summary and the copies
echo "the pair starts at $((SECONDS - START)) s with a time limit of ${LEFT} s"
"$PYTHON" "$REPO/benchmarks/scale.py" --data "$WORK/data" --workdir "$WORK" --configs multr_default dla --repeats 1 \
    --device "$DEVICE" --time-limit "$LEFT" --out "$OUT/whole_run" "${PAIR[@]}"
CODE=$?
cp "$WORK/dla.log" "$WORK/multr_default.log" "$OUT/" 2>/dev/null
echo "whole_run_gpu.sh done at $((SECONDS - START)) s (scale.py exit $CODE)"
exit $CODE
