#!/usr/bin/env bash
# Headroom check of issue 17 (item 4): Oracle vs DLA (and Naive) on generated sets with graded labels, 1,000 training
# queries, cascade clicks and a non-relevant feature the logging ranker used; paired tests over the pooled test queries.
#
# Usage: studies/headroom/reproduce.sh OUT_DIR [more run.py flags, e.g. --multr or --dry-run]
# The committed tables: `studies/headroom/reproduce.sh out/headroom` (the headroom check), then item 5's grid in
# passes on the same OUT_DIR (resumable; R = rerank_weight simulator_control paper_rebalance):
#   SEEDS="0 1" studies/headroom/reproduce.sh out/headroom --multr --sweeps $R observed_only
#   SEEDS="0 1" DATASETS="4 5" studies/headroom/reproduce.sh out/headroom --multr --sweeps $R \
#       --methods oracle_tested dla multr dla_tuned pal_tuned naive_tuned
#   SEEDS="0 1" studies/headroom/reproduce.sh out/headroom --multr --methods multr --sweeps paper_true_model
#   SEEDS=2 studies/headroom/reproduce.sh out/headroom --multr --sweeps $R --methods oracle_tested dla multr ...
#   SEEDS="0 1" DATASETS="1 2 3 4 5" studies/headroom/reproduce.sh out/headroom --multr --tables-only
# Environment: DATASETS (default "1 2 3"), SEEDS ("0 1"), STEPS (500), WORKERS (2), THREADS (the runner's default).
# Resumable: run it again after an interruption and it skips the finished runs.  The tables are copied to
# studies/headroom/results/ (generated.md: the runner's table with the p-value line; pairwise.md: every pair;
# sessions.md: sessions per phase and pilot choices per run; diagnostics.md: learned propensities, simulator fit;
# cells.md: which cells of the grid ran, with their seeds; grid.md, grid_vs_dla.md: item 5's rows against tuned
# DLA and DLA).
set -euo pipefail
if [ $# -lt 1 ]; then echo "usage: $0 OUT_DIR [run.py flags]" >&2; exit 2; fi
OUT_DIR=$1
shift
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2086  # DATASETS and SEEDS are lists
python "$HERE/run.py" --out "$OUT_DIR" --datasets ${DATASETS:-1 2 3} --seeds ${SEEDS:-0 1} \
  --steps "${STEPS:-500}" --workers "${WORKERS:-2}" ${THREADS:+--threads "$THREADS"} "$@"
case " $* " in *" --dry-run "*) exit 0 ;; esac
# the headroom check's tables as they are; after a --multr pass (the same OUT_DIR: its runs are reused) with a prefix
PREFIX=
case " $* " in *" --multr "*) PREFIX=multr_ ;; esac
mkdir -p "$HERE/results"
for table in generated pairwise sessions diagnostics cells grid grid_vs_dla; do
  if [ -f "$OUT_DIR/results/$table.md" ]; then cp "$OUT_DIR/results/$table.md" "$HERE/results/$PREFIX$table.md"; fi
done
