"""ultra_multr.experiments.diagnostics: learned propensities and simulator fit read back from the runs' curves."""
import json
import os

import numpy as np
import pytest
from conftest import require

require("tensorboard")
from torch.utils.tensorboard import SummaryWriter  # noqa: E402

from ultra_multr.experiments import diagnostics  # noqa: E402


def _run(root, name, method, curves, variant="sessions_per_query=4", done=True):
    """A run folder as the runner leaves it: run.json, done.json and TensorBoard curves {tag: [(step, value)]}."""
    run_dir = os.path.join(root, "runs", name)
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "run.json"), "w") as handle:
        json.dump({"dataset": "toy", "fold": "Fold1", "method": method, "variant": variant, "seed": 0}, handle)
    if done:
        with open(os.path.join(run_dir, "done.json"), "w") as handle:
            json.dump({}, handle)
    writer = SummaryWriter(os.path.join(run_dir, "model", "train_log"))
    for tag, points in curves.items():
        for step, value in points:
            writer.add_scalar(tag, value, step)
    writer.close()
    return run_dir


def _propensity_curves(last, first=(1.0, 0.9, 0.8)):
    """Three positions logged at steps 100 (first) and 200 (last)."""
    return {
        "propensity/position_%02d" % (i + 1): [(100, f), (200, v)] for i, (f, v) in enumerate(zip(first, last))
    }


def test_reads_last_propensities_and_best_simulator_state(tmp_path):
    simulator = {diagnostics.SIMULATOR_LL_TAG: [(250, -1.9), (500, -1.6), (750, -1.6), (1000, -2.0)]}
    run_dir = _run(str(tmp_path), "a", "multr", dict(_propensity_curves((1.0, 0.5, 0.25)), **simulator))
    run = diagnostics.run_diagnostics(run_dir)
    assert (run.dataset, run.variant, run.method) == ("toy", "sessions_per_query=4", "multr")
    np.testing.assert_allclose(run.propensities, [1.0, 0.5, 0.25], rtol=1e-6)  # step 200, not 100
    assert run.simulator_best == pytest.approx((-1.6, 500))  # the best, and the earliest of equal bests


def test_table_has_inverse_propensity_mean_and_std_over_runs_and_skips_unfinished(tmp_path):
    root = str(tmp_path)
    _run(root, "d1", "dla", _propensity_curves((1.0, 0.5, 0.25)))
    _run(root, "d2", "dla", _propensity_curves((1.0, 0.25, 0.2)))
    _run(root, "d3", "dla", _propensity_curves((1.0, 0.01, 0.01)), done=False)  # running: ignored
    _run(root, "n1", "naive", {})
    runs = diagnostics.collect(os.path.join(root, "runs"))
    assert sorted(r.method for r in runs) == ["dla", "dla", "naive"]
    text = diagnostics.format_markdown(runs)
    inverse_2 = np.array([2.0, 4.0])
    inverse_3 = np.array([4.0, 5.0])
    row = next(line for line in text.splitlines() if line.startswith("| dla |"))
    assert "| dla | 2 | - | - | %.2f +- %.2f | %.2f +- %.2f |" % (
        inverse_2.mean(), inverse_2.std(ddof=1), inverse_3.mean(), inverse_3.std(ddof=1)
    ) == row
    assert next(line for line in text.splitlines() if line.startswith("| naive |")) == "| naive | 1 | - | - | - | - |"


def test_a_missing_position_is_an_error_naming_the_log(tmp_path):
    curves = _propensity_curves((1.0, 0.5, 0.25))
    del curves["propensity/position_02"]
    run_dir = _run(str(tmp_path), "a", "dla", curves)
    with pytest.raises(ValueError, match="train_log.*positions \\[1, 3\\]"):
        diagnostics.run_diagnostics(run_dir)


def test_cli_writes_the_table_and_refuses_an_empty_folder(tmp_path, capsys):
    _run(str(tmp_path), "a", "dla", _propensity_curves((1.0, 0.5, 0.25)))
    out = str(tmp_path / "results" / "diagnostics.md")
    assert diagnostics.main([str(tmp_path / "runs"), "--out", out]) == 0
    with open(out) as handle:
        assert "| dla | 1 | - | - | 2.00 | 4.00 |" in handle.read()
    os.makedirs(str(tmp_path / "empty"))
    assert diagnostics.main([str(tmp_path / "empty")]) == 2
    assert "no finished run" in capsys.readouterr().err
