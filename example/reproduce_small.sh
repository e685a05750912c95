#!/usr/bin/env bash
# Small data: MQ2008 folds cut to 30 training queries, fresh cascade clicks; DLA, MULTR (rerank_weight=auto), and MULTR
# at the paper's fixed weight of the re-ranked term and at weight 0 (no re-ranked lists); five folds.
# Usage: example/reproduce_small.sh DATA_DIR OUT_DIR [--dry-run ...]; environment: see example/reproduce_common.sh.
set -euo pipefail
PRESET=(--train-queries 30 --methods dla multr --budgets --sweep --rerank-weights paper 0 --multr-hparams rerank_weight=auto)
source "$(dirname "$0")/reproduce_common.sh" "$@"
# MULTR at each fixed weight paired with the default (auto) and with DLA, per test query (pooled over folds and seeds).
if [[ " $* " != *" --dry-run "* ]]; then
  for A in paper 0; do
    python -m ultra_multr.experiments.compare "$OUT_DIR/runs" "$OUT_DIR/runs" --variant-before "rerank_weight=$A" \
      --label-before "MULTR a=$A" --label-after "MULTR auto" --out "$OUT_DIR/results/rerank_weight_$A.md"
  done
fi
