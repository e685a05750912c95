# Sourced by example/gpu_check.sh and benchmarks/whole_run_gpu.sh (not run alone).
# use_startup_hook DIR: when ultra_multr's start-up hook is not active for $PYTHON (no pip install put
# ultra_multr_startup.pth in place), write DIR/sitecustomize.py importing it and put DIR first on PYTHONPATH, for
# the caller and every process it starts (main.py included).
use_startup_hook() {
    if ! "$PYTHON" -c "import sys; sys.exit(not any(type(f).__name__ == 'UltraImportFinder' for f in sys.meta_path))"; then
        mkdir -p "$1" || return 1
        echo "import ultra_multr.compat.startup" > "$1/sitecustomize.py"
        export PYTHONPATH="$1${PYTHONPATH:+:$PYTHONPATH}"
    fi
}
