#!/usr/bin/env bash
# Click budgets on MQ2008: fixed logs of K = 1, 4, 16 cascade sessions per query (sampled once), Naive, DLA,
# MULTR and EIB-MULTR, five folds; one table per K.
#
# Usage: example/reproduce_budgets.sh DATA_DIR OUT_DIR [more reproduce_mq2008.py flags, e.g. --dry-run]
#   DATA_DIR holds MQ2008's S1.txt ... S5.txt; results (Markdown and CSV) in OUT_DIR/results, printed at the end.
# Environment: SEEDS (default "0 1 2"), STEPS (1000), WORKERS (2), FOLDS ("1 2 3 4 5"), THREADS (runner default).
# Resumable: run it again after an interruption and it skips the finished runs.
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 DATA_DIR OUT_DIR [reproduce_mq2008.py flags]" >&2; exit 2; fi
DATA_DIR=$1 OUT_DIR=$2
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck disable=SC2086  # SEEDS and FOLDS are lists
exec python "$HERE/reproduce_mq2008.py" --data "$DATA_DIR" --out "$OUT_DIR" \
  --folds ${FOLDS:-1 2 3 4 5} --seeds ${SEEDS:-0 1 2} --steps "${STEPS:-1000}" --workers "${WORKERS:-2}" \
  ${THREADS:+--threads "$THREADS"} \
  --methods naive dla multr eib_multr --budgets 1 4 16 --no-fresh --sweep "$@"
