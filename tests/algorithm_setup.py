"""Our algorithms built as ULTRA's main.py builds them, test-sized: settings files, main.py's arguments, an
algorithm and its training feed in-process, the validation split.  Shared by the tests of algorithms/ and
simulator/."""
from __future__ import annotations

import json
import os

from conftest import REPO_ROOT, require_ultra

ultra = require_ultra()

CASCADE = os.path.join(REPO_ROOT, "settings", "click_models", "cascade_eps0.1_ymax4.json")


#: Test-sized simulators (a few steps) lose to the position-only click model, and the test data have 12 validation
#: queries and few held-out sessions: tests of other behaviour switch the guard off and let the pilot and early
#: stopping choose (tests/algorithms/test_fair_protocol.py tests all three at their defaults).  The suite's generated
#: logs (write_synthetic_ultra_dataset) order by the label plus noise, mostly on fewer than 50 training queries: the
#: logger guard (on by default) would fire and MULTR would train as DLA, so tests of its simulator and estimator
#: switch it off (tests/algorithms/test_logger_guard.py tests it at its default).
SMALL_DATA_HPARAMS = {"simulator_guard": "none", "pilot_min_queries": "1", "simulator_min_heldout_sessions": "1",
                      "logger_guard": "none"}

#: 2 simulator steps of 8 sessions, 2 held-out batches of 8, a pilot of 3 steps of 16 lists per candidate (3 of them):
#: rerank_weight=auto's pilot.
PILOT = (
    "rerank_weight=auto,sample_num=2,simulator_steps=2,simulator_batch_size=8,simulator_heldout_batches=2,seed=3,device=cpu,"
    "rerank_pilot_steps=3,log_every=0"
)
#: A baseline's learning-rate pilot: 3 candidates, 3 steps each.
TUNE = "seed=1,device=cpu,log_every=0,tune=learning_rate,tune_grid=[0.01,0.5,0.05],tune_pilot_steps=3,pilot_min_queries=1"


def small_data(hparams, keep_defaults=()):
    """MULTR's ``hparams`` plus :data:`SMALL_DATA_HPARAMS` where they do not set them (but ``keep_defaults``: names
    left at MULTR's default)."""
    given = {part.split("=", 1)[0].strip() for part in hparams.split(",") if "=" in part} | set(keep_defaults)
    extra = ["%s=%s" % item for item in SMALL_DATA_HPARAMS.items() if item[0] not in given]
    return ",".join(part for part in [hparams] + extra if part)


def settings_for(tmp_path, algorithm_hparams, name="multr.json", algorithm="ultra_multr.MULTR", feed_hparams=None):
    """settings/multr_dla.json with a small ranker and test-sized hparams, written to tmp_path."""
    if "MULTR" in algorithm:
        algorithm_hparams = small_data(algorithm_hparams)
    with open(os.path.join(REPO_ROOT, "settings", "multr_dla.json")) as handle:
        settings = json.load(handle)
    settings["ranking_model_hparams"] = "hidden_layer_sizes=[32,16]"
    settings["learning_algorithm"] = algorithm
    settings["learning_algorithm_hparams"] = algorithm_hparams
    settings["train_input_hparams"] = feed_hparams or "click_model_json=%s,seed=0" % CASCADE
    path = tmp_path / name
    path.write_text(json.dumps(settings))
    return str(path)


def main_args(settings, model_dir, data_dir, *extra):
    return [
        "--setting_file", settings, "--data_dir", data_dir, "--model_dir", model_dir,
        "--output_dir", model_dir + "/out", "--batch_size", "16", "--selection_bias_cutoff", "10",
    ] + list(extra)


def build(data_dir, hparams, seed_feed=0, feed="ultra_multr.feeds.ClickSimulationFeed", feed_hparams=None,
          algorithm="ultra_multr.MULTR", objective_metric="ndcg_10", keep_defaults=()):
    """An algorithm (MULTR's with :func:`small_data` hparams, ``keep_defaults`` left at their defaults) and a training
    feed, wired the way main.py wires them."""
    data = ultra.utils.read_data(data_dir, "train", None, 0)
    settings = {
        "train_input_feed": feed,
        "train_input_hparams": "click_model_json=%s,seed=%d" % (CASCADE, seed_feed) if feed_hparams is None else feed_hparams,
        "ranking_model": "ultra.ranking_model.DNN",
        "ranking_model_hparams": "hidden_layer_sizes=[32,16]",
        "learning_algorithm": algorithm,
        "learning_algorithm_hparams": small_data(hparams, keep_defaults) if "MULTR" in algorithm else hparams,
        "metrics": ["ndcg"],
        "metrics_topn": [10],
        "objective_metric": objective_metric,
        "max_candidate_num": data.rank_list_size,
        "selection_bias_cutoff": 10,
    }
    data.pad(data.rank_list_size)
    model = ultra.utils.find_class(algorithm)(data, settings)
    feed = ultra.utils.find_class(feed)(model, 16, settings["train_input_hparams"])
    return model, feed, data


def train_losses(model, feed, data, steps):
    return [model.train(feed.get_batch(data, check_validation=True)[0])[0] for _ in range(steps)]


def read_valid(data_dir, max_candidate_num):
    valid = ultra.utils.read_data(data_dir, "valid", None, 0)
    valid.pad(max_candidate_num)
    return valid
