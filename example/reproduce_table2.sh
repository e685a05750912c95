#!/usr/bin/env bash
# Table 2 on MQ2008: fresh cascade clicks (noise 0.1, y_max 2), the nine methods of the paper's Table 2, five folds.
# Usage: example/reproduce_table2.sh DATA_DIR OUT_DIR [--dry-run ...]; environment: see example/reproduce_common.sh.
set -euo pipefail
PRESET=(--methods oracle multr dla rem paird pal naive rand_multr eib_multr --budgets --sweep)
source "$(dirname "$0")/reproduce_common.sh" "$@"
