#!/usr/bin/env bash
# The Baidu-ULTR study on generated logs (issue 18, item 6; studies/baidu/README.md): four logs in the release's
# layout (one row per document), 100,000 training sessions each, and every method on the same logged sessions.
#
# Usage: studies/baidu/reproduce.sh OUT_PREFIX       (the committed tables: studies/baidu/reproduce.sh out/baidu)
#   OUT_PREFIX_pbm            PBM clicks, features that nearly determine the grade, no logging confound
#   OUT_PREFIX_pbm_bias2      PBM clicks, the logger also favours a popularity feature unrelated to relevance (B = 2)
#   OUT_PREFIX_pbm_noisy      as pbm_bias2 with noisier relevance features (feature noise 4)
#   OUT_PREFIX_cascade_noisy  as pbm_noisy with cascade clicks (no IPS row: no exact position propensity)
#   OUT_PREFIX_pbm_det        as pbm_noisy with a nearly deterministic logger (noise 0.3), one seed: a screening
#   OUT_PREFIX_pbm_noisy_nonorm  pbm_noisy's log, the rankers' DNN without its per-document layer normalisation
#   OUT_PREFIX_cascade_noisy_std  cascade_noisy's log with per-feature standardisation (the default since issue 27)
#   OUT_PREFIX_pbm_noisy_nonorm_features, OUT_PREFIX_cascade_noisy_features  those two with the features-only logger
# then the reader's ingest rate on pbm's 100,000 sessions.  Environment: SEEDS (default "0 1 2").
# Resumable: run it again after an interruption and it skips the finished runs (each log is written once).
# The tables go to studies/baidu/results/<log>/ (baidu_metrics.md and .json, sessions.md, diagnostics.md,
# failed.md, the log's recipe), studies/baidu/results/feature_reliance.md (how much each ranker ranks by the popularity
# feature) and studies/baidu/results/ingest_100k.md (benchmarks/baidu_ingest_rate.py).
set -euo pipefail
if [ $# -ne 1 ]; then echo "usage: $0 OUT_PREFIX" >&2; exit 2; fi
OUT=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RESULTS=$HERE/results
study() {  # NAME, then run.py flags
  local name=$1
  shift
  # shellcheck disable=SC2086  # SEEDS is a list
  # a study with failed runs still reports the finished ones (and lists the failures in failed.md)
  python "$HERE/run.py" --out "${OUT}_$name" --seeds ${SEEDS:-0 1 2} "$@" \
    || echo "reproduce.sh: $name has failed runs, see $RESULTS/$name/failed.md" >&2
  mkdir -p "$RESULTS/$name"
  for table in baidu_metrics.md baidu_metrics.json sessions.md diagnostics.md failed.md; do
    cp "${OUT}_$name/results/$table" "$RESULTS/$name/$table"
  done
  cp "${OUT}_$name/log/recipe.json" "$RESULTS/$name/recipe.json"
}
# the first five tables were made before per-feature standardisation existed: --standardize off reproduces them
study pbm --click-model pbm --standardize off
study pbm_bias2 --click-model pbm --logger-bias 2 --standardize off
study pbm_noisy --click-model pbm --logger-bias 2 --feature-noise 4 --standardize off
study cascade_noisy --click-model cascade --logger-bias 2 --feature-noise 4 --standardize off
study pbm_det --click-model pbm --logger-bias 2 --feature-noise 4 --logger-noise 0.3 --seeds 0 --standardize off
# issue 27's reruns, standardised (the default): cascade_noisy's log again, and both logs with the features-only logger
study cascade_noisy_std --click-model cascade --logger-bias 2 --feature-noise 4
study pbm_noisy_nonorm --click-model pbm --logger-bias 2 --feature-noise 4 --ranker-norm none
# the features-only logger (a linear function of the lexical features plus noise, blind to the grades): position
# carries no relevance the features lack
study pbm_noisy_nonorm_features --click-model pbm --logger-bias 2 --feature-noise 4 --ranker-norm none --logger features
study cascade_noisy_features --click-model cascade --logger-bias 2 --feature-noise 4 --logger features
python "$HERE/feature_reliance.py" --out "$RESULTS" \
  --study "${OUT}_pbm" --study "${OUT}_pbm_bias2" --study "${OUT}_pbm_noisy" --study "${OUT}_cascade_noisy" --study "${OUT}_pbm_det" \
  --study "${OUT}_pbm_noisy_nonorm"
python "$HERE/../../benchmarks/baidu_ingest_rate.py" --out "${OUT}_ingest_100k" --log_files "${OUT}_pbm/log/parts/part-1_split-*.feather"
cp "${OUT}_ingest_100k/ingest.md" "$RESULTS/ingest_100k.md"
cp "${OUT}_ingest_100k/ingest.csv" "$RESULTS/ingest_100k.csv"
