"""A run's facts written once: the pilots' choices and refusals go into the run's ledger when decided, and the
sessions table (ultra_multr.experiments.budget) reads them there, giving the cells it used to parse out of the log."""
from __future__ import annotations

import json
import logging

import pytest

from conftest import require_ultra
from algorithm_setup import PILOT, TUNE, build, read_valid

ultra = require_ultra()

from ultra_multr.experiments import budget  # noqa: E402
from ultra_multr.session_budget import BUDGET_FILE, LEDGER, LEDGER_VERSION  # noqa: E402
from ultra_multr.simulator import trainer  # noqa: E402


#: every test starts and ends with an empty session ledger (conftest's fixture)
pytestmark = pytest.mark.usefixtures("fresh_ledger")


def rerank_pilot(data_dir, hparams):
    model, _, _ = build(data_dir, hparams)
    model.prepare(read_valid(data_dir, model.max_candidate_num), batch_size=16)


def tune_pilot(data_dir, hparams, algorithm):
    from ultra_multr.algorithms import tuning

    model, _, _ = build(data_dir, hparams, algorithm=algorithm)
    tuning.tune(model, read_valid(data_dir, model.max_candidate_num), batch_size=16)


NOT_VALIDATED = PILOT + ",simulator_guard=position,simulator_min_heldout_sessions=300"
CASES = {
    "rerank pilot": (lambda d: rerank_pilot(d, PILOT), None),
    "simulator not validated": (lambda d: rerank_pilot(d, NOT_VALIDATED), None),
    "simulator rejected": (lambda d: rerank_pilot(d, PILOT + ",simulator_guard=position"), -1e3),
    "too few validation queries": (lambda d: rerank_pilot(d, PILOT + ",pilot_min_queries=30"), None),
    "tune pilot": (lambda d: tune_pilot(d, TUNE, "ultra_multr.DLA"), None),
    "tune, too few validation queries": (
        lambda d: tune_pilot(d, TUNE.replace("pilot_min_queries=1", "pilot_min_queries=30"), "ultra_multr.Naive"), None
    ),
}
EXPECTED = {
    "simulator not validated": {
        "pilot choice": "the user simulator is not used",
        # known before training: the simulator is not trained (no early-stopping refusal), only not validated
        "refused": "only 16 distinct held-out sessions; USER SIMULATOR NOT VALIDATED",
    },
    "simulator rejected": {"pilot choice": "the user simulator is not used", "refused": "USER SIMULATOR REJECTED"},
    "too few validation queries": {"pilot choice": "", "refused": "only 12 validation queries"},
    "tune, too few validation queries": {"pilot choice": "", "refused": "only 12 validation queries"},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_table_reads_from_the_ledger_what_it_parsed_from_the_log(synthetic_data_dir, tmp_path, monkeypatch,
                                                                      caplog, case):
    run, heldout_log_likelihood = CASES[case]
    if heldout_log_likelihood is not None:
        monkeypatch.setattr(trainer, "heldout_log_likelihood", lambda simulator, batches: (heldout_log_likelihood, []))
    with caplog.at_level(logging.INFO, logger="ultra_multr"):
        run(synthetic_data_dir)
    summary = json.loads(json.dumps(LEDGER.summary()))  # as session_budget.json holds it
    assert summary["ledger_version"] == LEDGER_VERSION
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / BUDGET_FILE).write_text(json.dumps(summary))
    (tmp_path / "train.stderr").write_text(caplog.text)
    decided, logged = budget.decided_facts(summary["decisions"]), budget.logged_facts(str(tmp_path))
    assert decided == dict({"pilot choice": "", "refused": ""}, **logged)
    if case in EXPECTED:
        assert decided == EXPECTED[case]
    else:  # a pilot ran: its choice, and every candidate's score, are in the ledger
        choice = summary["decisions"]["tune" if case.startswith("tune") else "rerank_weight"]
        assert choice["by"] == "pilot" and len(choice["scores"]) == 3 and choice["validation_queries"] == 12
        assert decided["pilot choice"] and not decided["refused"]


def test_a_run_before_the_ledger_held_its_choices_is_read_from_its_log(tmp_path):
    old = {"phases": {"ranker": {"sessions": 9, "lists": 8, "clicks": 8}}, "total_sessions": 9, "decisions": {}}
    new = dict(old, ledger_version=LEDGER_VERSION)
    log = "[ultra_multr] tune=learning_rate: pilot of 3 steps, ndcg_10 by value: 0.01: 0.5; chosen learning_rate = 0.2"
    for name, summary in (("old", old), ("new", new)):
        run_dir = tmp_path / "runs" / name
        (run_dir / "model").mkdir(parents=True)
        (run_dir / "run.json").write_text(json.dumps({"dataset": "g", "fold": "Fold1", "label": name, "seed": 0}))
        (run_dir / "done.json").write_text(json.dumps({"sessions": summary}))
        (run_dir / "model" / BUDGET_FILE).write_text(json.dumps(summary))
        (run_dir / "train.stderr").write_text(log)
    rows = budget.format_markdown(str(tmp_path / "runs")).splitlines()
    assert "| g / Fold1 / old / seed 0 | 9 |  |  |  |  | 9 | 1.000 | learning_rate = 0.2 |  |  |" in rows
    assert "| g / Fold1 / new / seed 0 | 9 |  |  |  |  | 9 | 1.000 |  |  |  |" in rows  # its ledger says: no pilot


def test_a_fired_logger_guard_is_a_refusal_in_the_table():
    """logger_guard=order_fit's decision (ultra_multr.components.guards) as the ledger records it."""
    fired = {"logger_guard": {"decision": "fired", "host_losses": True, "agreement": 0.8312, "training_queries": 60},
             "rerank_weight": {"by": "simulator_not_used"}}
    assert budget.decided_facts(fired) == {"pilot choice": "the user simulator is not used",
                                           "refused": "LOGGER GUARD FIRED (0.831 of held-out pairs)"}
    few = {"logger_guard": {"decision": "too_few_queries", "host_losses": True, "training_queries": 20}}
    assert budget.decided_facts(few)["refused"] == "only 20 training queries (logger guard)"
    passed = {"logger_guard": {"decision": "passed", "host_losses": False, "agreement": 0.99, "training_queries": 200}}
    assert budget.decided_facts(passed) == {"pilot choice": "", "refused": ""}
