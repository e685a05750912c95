#!/usr/bin/env bash
# Click budgets on MQ2008: fixed logs of K = 1, 4, 16 cascade sessions per query (sampled once); Naive, DLA, MULTR,
# EIB-MULTR; five folds; one table per K.
# Usage: example/reproduce_budgets.sh DATA_DIR OUT_DIR [--dry-run ...]; environment: see example/reproduce_common.sh.
set -euo pipefail
PRESET=(--methods naive dla multr eib_multr --budgets 1 4 16 --no-fresh --sweep)
source "$(dirname "$0")/reproduce_common.sh" "$@"
