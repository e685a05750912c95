"""Train MULTR and DLA through ULTRA's main.py on ULTRA's bundled toy data.

Usage::

    python example/demo.py --ultra PATH/TO/ULTRA_pytorch [--steps 300] [--out demo_out]

ULTRA's checkout ships a small ready-made dataset (``tests/data``: 136
features, labels 0-2, lists of up to 9 documents), so nothing is downloaded
or generated.  For each method the demo runs ``main.py`` to train and then
``main.py --test_only True`` to evaluate, and prints a table of the test
metrics that main.py reports.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLICK_MODEL = os.path.join(REPO, "settings", "click_models", "cascade_eps0.1_ymax2.json")
METHODS = {
    "DLA": ("ultra_multr.DLA", "seed=0,log_every=100"),
    # logger_guard=none: the toy data have about 20 training queries, too few for MULTR's logger guard (on by
    # default) to measure, so it would fire and MULTR would train as DLA; the demo shows the simulator at work
    "MULTR": ("ultra_multr.MULTR", "seed=0,log_every=100,sample_num=8,simulator_steps={steps},logger_guard=none"),
}
#: Printed before the runs: why the demo's MULTR differs from MULTR's defaults.
GUARD_NOTE = ("note: MULTR runs with logger_guard=none: the toy data have too few training queries for the logger "
              "guard to measure (it would fire and MULTR would train as DLA); the demo shows the simulator at work")


def settings_file(out: str, name: str, algorithm: str, hparams: str) -> str:
    with open(os.path.join(REPO, "settings", "multr_dla.json")) as handle:
        settings = json.load(handle)
    settings["learning_algorithm"] = algorithm
    settings["learning_algorithm_hparams"] = hparams
    # The toy data's labels go up to 2, not 4: the cascade of the paper for y_max = 2.
    settings["train_input_hparams"] = "click_model_json=%s,seed=0" % CLICK_MODEL
    path = os.path.join(out, name + ".json")
    with open(path, "w") as handle:
        json.dump(settings, handle, indent=2)
    return path


def run_main(ultra_dir: str, args: list) -> str:
    completed = subprocess.run(
        [sys.executable, os.path.join(ultra_dir, "main.py")] + args,
        cwd=ultra_dir, capture_output=True, text=True,
    )
    if completed.returncode != 0:
        sys.exit("main.py %s failed:\n%s" % (" ".join(args), completed.stderr[-3000:]))
    return completed.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ultra", required=True, help="ULTRA_pytorch checkout (with main.py and tests/data)")
    parser.add_argument("--steps", type=int, default=300, help="ranker (and simulator) training steps")
    parser.add_argument("--out", default="demo_out")
    args = parser.parse_args()
    ultra_dir = os.path.abspath(args.ultra)
    data_dir = os.path.join(ultra_dir, "tests", "data", "")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    results = {}
    print(GUARD_NOTE, flush=True)
    for name, (algorithm, hparams) in METHODS.items():
        settings = settings_file(out, name, algorithm, hparams.format(steps=args.steps))
        common = [
            "--setting_file", settings, "--data_dir", data_dir, "--model_dir", os.path.join(out, name),
            "--output_dir", os.path.join(out, name, "output"), "--selection_bias_cutoff", "9",
            "--batch_size", "64",
        ]
        # Every demo run trains from scratch: main.py refuses a model dir holding a ranker checkpoint.
        shutil.rmtree(os.path.join(out, name), ignore_errors=True)
        print("training %s for %d steps ..." % (name, args.steps), flush=True)
        run_main(ultra_dir, common + ["--max_train_iteration", str(args.steps), "--steps_per_checkpoint", "50"])
        report = run_main(ultra_dir, common + ["--test_only", "True"])
        line = re.search(r"eval: (.*)", report).group(1)
        results[name] = dict((k, float(v)) for k, v in (item.split(":") for item in line.split()))
    metrics = list(next(iter(results.values())))
    print("\n| method | " + " | ".join(metrics) + " |")
    print("|---|" + "---|" * len(metrics))
    for name, values in results.items():
        print("| %s | %s |" % (name, " | ".join("%.3f" % values[m] for m in metrics)))


if __name__ == "__main__":
    main()
