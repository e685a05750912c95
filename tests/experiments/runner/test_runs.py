"""The run fingerprint's hyper-parameters (ultra_multr.experiments.runner.runs.resolved_hparams)."""
import sys

import pytest

from ultra_multr.experiments.runner.runs import find_main_py, fingerprint_settings, resolved_hparams

FEED = "ultra_multr.feeds.ClickSimulationFeed"


def feed_hparams(hparams: str) -> dict:
    return resolved_hparams({"train_input_feed": FEED, "train_input_hparams": hparams})["train_input_feed"]


def test_an_intervention_share_of_zero_leaves_the_fingerprint_of_runs_finished_before_the_option():
    before = feed_hparams("click_model_json=cascade.json,seed=3")
    # The feed's other defaults are there (a changed default makes a finished run stale) ...
    assert before["seed"] == 3 and before["session_budget"] == 0
    # ... but not the intervention option while it is off, whatever its kind says: off, the batches are those of
    # the code before the option (tests/feeds/test_simulation.py), so a run finished then is still this run.
    assert "intervention_share" not in before and "intervention" not in before
    assert feed_hparams("click_model_json=cascade.json,seed=3,intervention_share=0,intervention=shuffle") == before


def test_a_share_of_intervention_sessions_is_another_run():
    swapped = feed_hparams("click_model_json=cascade.json,intervention_share=0.1")
    assert swapped["intervention_share"] == 0.1 and swapped["intervention"] == "swap"
    assert feed_hparams("click_model_json=cascade.json,intervention_share=0.1,intervention=shuffle") != swapped


@pytest.mark.parametrize("option, off, on", [("propensity_update_every", "1", 4),
                                              ("examination_ranker_layers", "[]", [64]),
                                              ("simulator_heldout_max_share", "0", 0.25)])
def test_a_multr_option_that_is_off_leaves_the_fingerprint_of_runs_finished_before_it(option, off, on):
    """Off, each option runs as the code before it: propensity_update_every=1 updates the examination side on every
    update (the same losses and parameters, bit for bit, checked when it was added); simulator_heldout_max_share=0
    holds out the fraction alone (tests/simulator/test_training.py).  While off it is not in the fingerprint."""
    from conftest import require_ultra

    require_ultra()

    def multr_hparams(hparams: str) -> dict:
        return resolved_hparams({"learning_algorithm": "ultra_multr.MULTR",
                                 "learning_algorithm_hparams": hparams})["learning_algorithm"]

    before = multr_hparams("seed=0,simulator_steps=10000")
    assert before["propensity_ranker"] == "dla" and option not in before
    assert multr_hparams("seed=0,simulator_steps=10000,%s=%s" % (option, off)) == before
    switched = multr_hparams("seed=0,simulator_steps=10000,%s=%s" % (option, on))
    assert switched[option] == on and switched != before


def test_naming_the_old_logger_guard_default_keeps_the_fingerprint_of_runs_finished_under_it(monkeypatch):
    """MULTR's logger_guard default became order_fit: a study that names logger_guard=none keeps its finished runs
    (studies/paper_setting/screen.py's MULTR rows); one that does not gets new runs."""
    from conftest import require_ultra

    require_ultra()
    from ultra_multr.experiments.runner import runs

    before = {"learning_algorithm": "ultra_multr.MULTR",
              "learning_algorithm_hparams": "tune_grid=[0.01,0.05],simulator_steps=10000,seed=0,learning_rate=0.05"}
    named = dict(before, learning_algorithm_hparams="tune_grid=[0.01,0.05],simulator_steps=10000,logger_guard=none,"
                                                    "seed=0,learning_rate=0.05")
    assert runs.fingerprint_settings(named) == before
    for hparams in ("logger_guard=none,seed=0", "seed=0,logger_guard=none", "logger_guard=none"):
        stripped = runs.fingerprint_settings(dict(before, learning_algorithm_hparams=hparams))
        assert stripped["learning_algorithm_hparams"] == hparams.replace("logger_guard=none", "").strip(",")
    ultras = dict(before, learning_algorithm="ultra.learning_algorithm.DLA",
                  learning_algorithm_hparams="logger_guard=none")
    assert runs.fingerprint_settings(ultras) == ultras  # ULTRA's own classes: their strings are theirs

    def spec(settings):
        return runs.RunSpec(run_dir="/nonexistent/run", data_dir="/nonexistent/data", seed=0, method="multr",
                            settings=settings, main_args={"batch_size": 256}, info={})

    guard = runs.resolved_hparams(named)["learning_algorithm"]["logger_guard"]
    assert guard == "none" and runs.resolved_hparams(before)["learning_algorithm"]["logger_guard"] == "order_fit"
    assert spec(named).fingerprint != spec(before).fingerprint  # unnamed, the new default: another run
    # A run finished while none was the default: its settings were `before`, resolved as `named` resolves now.
    resolve = runs.resolved_hparams
    monkeypatch.setattr(runs, "resolved_hparams", lambda settings: resolve(named))
    finished_then = spec(before).fingerprint
    monkeypatch.undo()
    assert spec(named).fingerprint == finished_then


def test_main_py_is_found_next_to_the_ultra_package_without_importing_ultra(monkeypatch, tmp_path):
    """Importing ULTRA needs the start-up hook (its TensorFlow import); locating main.py must not import it."""
    (tmp_path / "ultra").mkdir()
    (tmp_path / "ultra" / "__init__.py").write_text("raise ImportError('ULTRA imported')\n")
    (tmp_path / "main.py").write_text("")
    monkeypatch.delenv("ULTRA_MAIN", raising=False)
    for name in [n for n in sys.modules if n == "ultra" or n.startswith("ultra.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert find_main_py() == str(tmp_path / "main.py")
    assert "ultra" not in sys.modules
    (tmp_path / "main.py").unlink()
    with pytest.raises(FileNotFoundError, match="not next to the ultra package"):
        find_main_py()


def test_naming_a_knob_added_after_runs_while_it_is_off_keeps_their_fingerprint():
    """examination_ranker_layers came after the simulator_designs grid had finished runs naming every knob: a string
    naming it off fingerprints as those runs' strings did (they stay valid); naming it on is another run; a knob not
    declared ``added_after_runs`` stays in the string as named."""
    from conftest import require_ultra

    require_ultra()
    from ultra_multr.config import knob

    def fingerprinted(hparams: str) -> str:
        return fingerprint_settings({"learning_algorithm": "ultra_multr.MULTR",
                                     "learning_algorithm_hparams": hparams})["learning_algorithm_hparams"]

    assert fingerprinted("seed=0,examination_ranker_layers=[],propensity_update_every=1") == \
        "seed=0,propensity_update_every=1"
    assert fingerprinted("seed=0,examination_ranker_layers=[64]") == "seed=0,examination_ranker_layers=[64]"
    assert fingerprinted("seed=0, propensity_update_every=1") == "seed=0, propensity_update_every=1"
    with pytest.raises(ValueError, match="added_after_runs needs inert_when"):
        knob(1, added_after_runs=True)
