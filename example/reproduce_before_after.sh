#!/usr/bin/env bash
# MULTR before and after issue 8's estimator changes (one click stream, guarded weights, re-ranked weight from
# data, simulator defaults and early stopping), side by side on MQ2008: fresh cascade clicks, five folds, DLA as
# the reference, every test query paired across the two codes.
# Usage: example/reproduce_before_after.sh DATA_DIR OUT_DIR   (environment: SEEDS, STEPS, WORKERS, FOLDS, THREADS
#   as example/reproduce_common.sh). Needs this repository's git history: the "before" code is commit f136afa,
#   checked out (git worktree) into OUT_DIR/before_code and run on the data the "after" runs prepared.
# Resumable; writes and prints OUT_DIR/before_after.md.
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 DATA_DIR OUT_DIR" >&2; exit 2; fi
DATA_DIR=$1
OUT_DIR=$(mkdir -p "$2" && cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
BEFORE=f136afa
bash "$HERE/reproduce_table2.sh" "$DATA_DIR" "$OUT_DIR/after" --methods dla multr
[ -d "$OUT_DIR/before_code" ] || git -C "$HERE/.." worktree add --detach "$OUT_DIR/before_code" "$BEFORE"
mkdir -p "$OUT_DIR/before"
ln -sfn "$OUT_DIR/after/data" "$OUT_DIR/before/data"
# shellcheck disable=SC2086  # SEEDS and FOLDS are lists
PYTHONPATH="$OUT_DIR/before_code" OMP_NUM_THREADS="${THREADS:-1}" python "$OUT_DIR/before_code/example/reproduce_mq2008.py" \
  --data "$DATA_DIR" --out "$OUT_DIR/before" --folds ${FOLDS:-1 2 3 4 5} --seeds ${SEEDS:-0 1 2} \
  --steps "${STEPS:-1000}" --workers "${WORKERS:-2}" --methods multr --budgets --sweep
python -m ultra_multr.experiments.compare "$OUT_DIR/before/runs" "$OUT_DIR/after/runs" --method multr --against dla \
  --label-before "MULTR before" --label-after "MULTR after" --out "$OUT_DIR/before_after.md"
