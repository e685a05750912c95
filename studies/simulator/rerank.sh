#!/usr/bin/env bash
# The MULTR simulator on logged vs uniformly random orders (studies/simulator/results/simulator_rerank.md): scores the
# seed-0 simulators of the small-data and Table 2 studies with simulator_report, held-out sessions in each order.
# Usage: studies/simulator/rerank.sh SMALL_OUT TABLE2_OUT OUT_DIR
#   SMALL_OUT / TABLE2_OUT: the --out folders of studies/mq2008/run.py --table small and --table table2 (finished);
#   environment: FOLDS (default "1 2 3 4 5"), SESSIONS (20000 training and held-out sessions).
set -euo pipefail
if [ $# -ne 3 ]; then echo "usage: $0 SMALL_OUT TABLE2_OUT OUT_DIR" >&2; exit 2; fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLICKS="$HERE/../../settings/click_models/cascade_eps0.1_ymax2.json"
mkdir -p "$3"
for PAIR in "small:$1" "full:$2"; do
  NAME=${PAIR%%:*} STUDY=${PAIR#*:}
  for K in ${FOLDS:-1 2 3 4 5}; do
    for ORDER in logged random; do
      python -m ultra_multr.experiments.simulator_report --data_dir "$STUDY/data/Fold$K" --click_model "$CLICKS" \
        --simulator_checkpoint "$STUDY/runs/mq2008/Fold$K/multr/seed0/model/ultra_multr.MULTR.simulator.ckpt" \
        --train_sessions "${SESSIONS:-20000}" --heldout_sessions "${SESSIONS:-20000}" --seed 0 \
        --heldout_order "$ORDER" --out "$3/${NAME}_Fold${K}_${ORDER}" > /dev/null
    done
  done
done
python "$HERE/rerank_table.py" "$3" > "$3/simulator_rerank.md.tmp"
mv "$3/simulator_rerank.md.tmp" "$3/simulator_rerank.md"
cat "$3/simulator_rerank.md"
