"""The run fingerprint's hyper-parameters (ultra_multr.experiments.runner.runs.resolved_hparams)."""
from ultra_multr.experiments.runner.runs import resolved_hparams

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
