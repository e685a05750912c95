#!/usr/bin/env bash
# Position-based clicks on MQ2008 (eta = 2, noise 0.1, y_max 2), fresh clicks, Naive, DLA and MULTR, five folds.
#
# Usage: example/reproduce_pbm.sh DATA_DIR OUT_DIR [more reproduce_mq2008.py flags, e.g. --dry-run]
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
  --click-model "$HERE/../settings/click_models/pbm_eta2_eps0.1_ymax2.json" \
  --methods naive dla multr --budgets --sweep "$@"
