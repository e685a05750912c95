#!/usr/bin/env bash
# One-command check of ultra_multr on a CUDA machine: at most 8 minutes (the sum of the stage limits).
#
#   example/gpu_check.sh LOG_DIR          # on the GPU machine
#   example/gpu_check.sh --cpu LOG_DIR    # the same path on CPU (short; for trying the script)
#
# Stages, each with its own log in LOG_DIR and a time limit; a failed stage does
# not stop the others, and the exit status is non-zero when any failed:
#   1. tests      python -m pytest on $GPU_CHECK_TESTS (default: the whole suite);
#                 tests taking the `device` fixture run on cpu and cuda.
#   2. benchmark  benchmarks/step_time.py --device cuda (DLA vs MULTR step time, peak memory;
#                 sampled mode with and without CUDA graphs).
#      profile    benchmarks/profile_step.py --device cuda (where DLA's and MULTR's step time goes).
#   3. main_train ULTRA's unmodified main.py trains MULTR (device=cuda) on generated data, validating
#                 twice; main_test: main.py --test_only on that model dir; main_test_cpu: the same
#                 with CUDA hidden (CUDA_VISIBLE_DEVICES=""), i.e. the CUDA-written checkpoint read
#                 on a CPU-only machine; the two "eval:" lines must agree.
#
# Needs: torch, ULTRA importable (e.g. ULTRA's checkout on PYTHONPATH; $ULTRA_MAIN or main.py next to
# the `ultra` package), no network.  ultra_multr is taken from this checkout (prepended to
# PYTHONPATH).  When ultra_multr's start-up hook (ultra_multr_startup.pth, put in place by a pip
# install) is not active, a sitecustomize.py that imports it is written to LOG_DIR/site and put on
# PYTHONPATH, for this script and the main.py processes it and the tests start.
set -uo pipefail

DEVICE=cuda
if [ "${1:-}" = "--cpu" ]; then
    DEVICE=cpu
    shift
fi
if [ $# -ne 1 ]; then
    echo "usage: $0 [--cpu] LOG_DIR" >&2
    exit 2
fi
REPO="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$1" || exit 2
LOGS="$(cd "$1" && pwd)"
PYTHON="${PYTHON:-python}"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
# shellcheck source=startup_hook.sh
. "$REPO/example/startup_hook.sh"

use_startup_hook "$LOGS/site" || exit 2
ULTRA_MAIN="$("$PYTHON" -c 'from ultra_multr.experiments.runner.runs import find_main_py; print(find_main_py())')" || {
    echo "ULTRA is not importable (put its checkout on PYTHONPATH)" >&2
    exit 2
}
export ULTRA_MAIN

FAILED=()
# stage NAME SECONDS COMMAND...: run COMMAND with a time limit, output to LOGS/NAME.log.
stage() {
    local name="$1" limit="$2"
    shift 2
    local start=$SECONDS
    timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1
    local code=$?
    printf '%-14s exit %3d  %4ds  %s\n' "$name" "$code" $((SECONDS - start)) "$LOGS/$name.log" | tee -a "$LOGS/summary.txt"
    [ "$code" -eq 0 ] || FAILED+=("$name")
}

: > "$LOGS/summary.txt"
{
    echo "gpu_check.sh on $(hostname), device $DEVICE, $(date -u)"
    "$PYTHON" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
    echo "ULTRA main.py: $ULTRA_MAIN"
    (cd "$REPO" && git rev-parse HEAD 2>/dev/null) || true
} | tee -a "$LOGS/summary.txt"
if [ "$DEVICE" = cuda ]; then
    "$PYTHON" -c "import torch; assert torch.cuda.is_available(), 'CUDA is not available (use --cpu)'" || exit 2
    BENCH=(--steps 20)
    PROFILE=(--samples 8)
else
    BENCH=(--steps 2 --warmup 1 --batch-size 32 --features 46 --samples 0 4)
    PROFILE=(--steps 2 --warmup 1 --batch-size 32 --features 46 --samples 4)
fi

# 1. The test suite.
read -r -a TESTS <<< "${GPU_CHECK_TESTS:-tests}"
stage tests 230 bash -c 'cd "$1" && shift && "$@"' _ "$REPO" "$PYTHON" -m pytest -q -rs --durations=10 -p no:cacheprovider "${TESTS[@]}"

# 2. Step time and peak memory.
stage benchmark 70 "$PYTHON" "$REPO/benchmarks/step_time.py" --device "$DEVICE" "${BENCH[@]}"
stage profile 30 "$PYTHON" "$REPO/benchmarks/profile_step.py" --device "$DEVICE" "${PROFILE[@]}"

# 3. main.py: train, then --test_only on the device and with CUDA hidden.
RUN="$LOGS/main_run"
rm -rf "$RUN"
mkdir -p "$RUN"
"$PYTHON" - "$REPO" "$RUN" "$DEVICE" <<'EOF' || FAILED+=("main_setup")
import json, os, sys
from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset

repo, run, device = sys.argv[1:]
write_synthetic_ultra_dataset(os.path.join(run, "data"))
with open(os.path.join(repo, "settings", "multr_dla.json")) as handle:
    settings = json.load(handle)
settings["train_input_hparams"] = "click_model_json=%s,seed=0" % os.path.join(
    repo, "settings", "click_models", "cascade_eps0.1_ymax4.json")
settings["ranking_model_hparams"] = "hidden_layer_sizes=[64,32]"
# logger_guard=none: the generated log orders by the label plus noise, so the logger guard (MULTR's default) would
# fire and MULTR would train as DLA, leaving its simulator on the device unchecked; simulator_guard=none: its 4 x 64
# held-out sessions are under simulator_min_heldout_sessions, so the simulator guard would not train it: with it off
# the simulator and the DR loss run on the device
hparams = ("sample_num=4,simulator_steps=200,simulator_batch_size=64,rerank_pilot_steps=20,seed=0,log_every=50,"
           "logger_guard=none,simulator_guard=none,device=%s")
settings["learning_algorithm_hparams"] = hparams % device
with open(os.path.join(run, "settings.json"), "w") as handle:
    json.dump(settings, handle, indent=1)
settings["learning_algorithm_hparams"] = hparams % "auto"
with open(os.path.join(run, "settings_auto.json"), "w") as handle:
    json.dump(settings, handle, indent=1)
EOF
MAIN=("$PYTHON" "$ULTRA_MAIN" --data_dir "$RUN/data/" --model_dir "$RUN/model/" --output_dir "$RUN/out/"
      --batch_size 64 --selection_bias_cutoff 10)
stage main_train 90 bash -c 'cd "$1" && shift && "$@"' _ "$RUN" "${MAIN[@]}" --setting_file "$RUN/settings.json" \
    --max_train_iteration 100 --steps_per_checkpoint 50
stage main_test 30 bash -c 'cd "$1" && shift && "$@"' _ "$RUN" "${MAIN[@]}" --setting_file "$RUN/settings.json" \
    --test_only True
stage main_test_cpu 30 env CUDA_VISIBLE_DEVICES= bash -c 'cd "$1" && shift && "$@"' _ "$RUN" "${MAIN[@]}" \
    --setting_file "$RUN/settings_auto.json" --test_only True
# The same checkpoint scored on the device and on CPU: main.py prints 3 decimals.
"$PYTHON" - "$LOGS/main_test.log" "$LOGS/main_test_cpu.log" > "$LOGS/main_eval_match.log" 2>&1 <<'EOF'
import re, sys

evals = []
for path in sys.argv[1:]:
    lines = [line for line in open(path, errors="replace") if line.strip().startswith("eval:")]
    evals.append({k: float(v) for k, v in re.findall(r"(\w+):([0-9.]+)", lines[-1])} if lines else {})
    print("%s: %s" % (path, lines[-1].strip() if lines else "no eval: line"))
device, cpu = evals
if not device or set(device) != set(cpu) or any(abs(device[k] - cpu[k]) > 0.0015 for k in device):
    sys.exit("main.py --test_only on the device and on CPU disagree (or printed no metrics)")
EOF
[ $? -eq 0 ] || FAILED+=("main_eval_match")
tee -a "$LOGS/summary.txt" < "$LOGS/main_eval_match.log"
grep -h "passed\|failed" "$LOGS/tests.log" | tail -1 | tee -a "$LOGS/summary.txt"

if [ ${#FAILED[@]} -gt 0 ]; then
    echo "FAILED: ${FAILED[*]}" | tee -a "$LOGS/summary.txt"
    exit 1
fi
echo "all stages passed" | tee -a "$LOGS/summary.txt"
