#!/usr/bin/env bash
# Position-based clicks on MQ2008 (eta = 2, noise 0.1, y_max 2), fresh clicks; Naive, DLA, MULTR; five folds.
# Usage: example/reproduce_pbm.sh DATA_DIR OUT_DIR [--dry-run ...]; environment: see example/reproduce_common.sh.
set -euo pipefail
PRESET=(--click-model "$(dirname "$0")/../settings/click_models/pbm_eta2_eps0.1_ymax2.json"
        --methods naive dla multr --budgets --sweep)
source "$(dirname "$0")/reproduce_common.sh" "$@"
