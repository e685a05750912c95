# Sourced by example/reproduce_{table2,budgets,pbm,small}.sh after they set PRESET (an array of reproduce_mq2008.py flags).
#
# Usage of those scripts: SCRIPT DATA_DIR OUT_DIR [more reproduce_mq2008.py flags, e.g. --dry-run]
#   DATA_DIR holds MQ2008's S1.txt ... S5.txt; results (Markdown and CSV) go to OUT_DIR/results and
#   OUT_DIR/results/summary.md is printed at the end.
# Environment: SEEDS (default "0 1 2"), STEPS (1000), WORKERS (2), FOLDS ("1 2 3 4 5"), THREADS (the runner's
#   default: $OMP_NUM_THREADS if set, else cores // workers).
# Resumable: run it again after an interruption and it skips the finished runs.
if [ $# -lt 2 ]; then echo "usage: $0 DATA_DIR OUT_DIR [reproduce_mq2008.py flags]" >&2; exit 2; fi
DATA_DIR=$1 OUT_DIR=$2
shift 2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2086  # SEEDS and FOLDS are lists
python "$HERE/reproduce_mq2008.py" --data "$DATA_DIR" --out "$OUT_DIR" \
  --folds ${FOLDS:-1 2 3 4 5} --seeds ${SEEDS:-0 1 2} --steps "${STEPS:-1000}" --workers "${WORKERS:-2}" \
  ${THREADS:+--threads "$THREADS"} "${PRESET[@]}" "$@"
