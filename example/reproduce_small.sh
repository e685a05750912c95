#!/usr/bin/env bash
# Small data: MQ2008 folds cut to 30 training queries, fresh cascade clicks; DLA, MULTR (rerank_weight=auto), and MULTR
# at the paper's fixed weight of the re-ranked term and at weight 0 (no re-ranked lists); five folds.
# Usage: example/reproduce_small.sh DATA_DIR OUT_DIR [--dry-run ...]; environment: see example/reproduce_common.sh.
set -euo pipefail
PRESET=(--train-queries 30 --methods dla multr --budgets --sweep --rerank-weights paper 0)
source "$(dirname "$0")/reproduce_common.sh" "$@"
