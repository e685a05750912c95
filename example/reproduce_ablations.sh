#!/usr/bin/env bash
# Two ablations of MULTR's defaults on MQ2008, each paired per test query with the default on the same data:
#   guard.md                      dr_weight_guard=none (the paper's unbounded weights) vs the default clip, fresh clicks;
#   k4_simulator_eval_every.md    simulator_eval_every=25 vs the default 250 with a fixed log of K = 4 sessions per
#                                 query (the simulator overfits that log before its first evaluation at 250).
# Usage: example/reproduce_ablations.sh DATA_DIR OUT_DIR [--dry-run]   (environment: SEEDS, STEPS, WORKERS, FOLDS,
#   THREADS as example/reproduce_common.sh). Resumable; writes OUT_DIR/guard.md and OUT_DIR/k4_simulator_eval_every.md.
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 DATA_DIR OUT_DIR" >&2; exit 2; fi
DATA_DIR=$1
OUT_DIR=$(mkdir -p "$2" && cd "$2" && pwd)
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
run() {
  # shellcheck disable=SC2086  # SEEDS and FOLDS are lists
  python "$HERE/reproduce_mq2008.py" --data "$DATA_DIR" --folds ${FOLDS:-1 2 3 4 5} --seeds ${SEEDS:-0 1 2} \
    --steps "${STEPS:-1000}" --workers "${WORKERS:-2}" ${THREADS:+--threads "$THREADS"} --sweep "$@" "${EXTRA[@]}"
}
EXTRA=("$@")
run --out "$OUT_DIR/default" --methods dla multr --budgets 4
run --out "$OUT_DIR/guard_none" --methods multr --budgets --multr-hparams dr_weight_guard=none
run --out "$OUT_DIR/eval_every_25" --methods multr --budgets 4 --no-fresh --multr-hparams simulator_eval_every=25
if [[ " ${EXTRA[*]} " == *" --dry-run "* ]]; then exit 0; fi
python -m ultra_multr.experiments.compare "$OUT_DIR/guard_none/runs" "$OUT_DIR/default/runs" --method multr \
  --against dla --label-before "guard none" --label-after "guard clip" --out "$OUT_DIR/guard.md"
python -m ultra_multr.experiments.compare "$OUT_DIR/eval_every_25/runs" "$OUT_DIR/default/runs" --method multr \
  --against dla --variant-before sessions_per_query=4 --variant-after sessions_per_query=4 \
  --label-before "MULTR simulator_eval_every=25" --label-after "MULTR default (250)" \
  --out "$OUT_DIR/k4_simulator_eval_every.md"
