"""studies/paper_setting/over_runs.py: the grid's per-run tables judged over runs, against the literal equations."""
from __future__ import annotations

import csv
import importlib.util
import os
import sys

import numpy as np
import pytest
from conftest import REPO_ROOT
from scipy import stats

_SPEC = importlib.util.spec_from_file_location(
    "paper_setting_over_runs", os.path.join(REPO_ROOT, "studies", "paper_setting", "over_runs.py"))
study = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = study
_SPEC.loader.exec_module(study)

HEADER = ["data", "set", "seed", "regime", "method", "ndcg10", "delta_vs_dla", "p_vs_dla"]


def _write(path, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        writer.writerows(rows)


@pytest.fixture
def results(tmp_path):
    dla = {("a", 0): 0.90, ("a", 1): 0.91, ("b", 0): 0.80, ("b", 1): 0.82, ("c", 0): 0.70, ("c", 1): 0.75}
    gain = {("a", 0): 0.010, ("a", 1): 0.002, ("b", 0): 0.004, ("b", 1): 0.006, ("c", 0): -0.001, ("c", 1): 0.003}
    rows = []
    for (name, seed), value in dla.items():
        rows.append(["recipe", name, seed, "cascade", "DLA", "%.4f" % value, "", ""])
        rows.append(["recipe", name, seed, "cascade", "MULTR, a comma", "%.4f" % (value + gain[(name, seed)]), "", ""])
    _write(tmp_path / "paper_setting_seeds.csv", rows)
    _write(tmp_path / "paper_setting_pbm_seeds.csv", [["recipe", "a", 0, "pbm", "DLA", "0.5", "", ""],
                                                      ["recipe", "a", 0, "pbm", "MULTR, a comma", "0.6", "", ""]])
    _write(tmp_path / "paper_setting_sparse_seeds.csv", [])
    with open(tmp_path / "paper_setting_all.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["data", "regime", "method", "p_holm"])
        writer.writerow(["recipe", "cascade", "MULTR, a comma", "0.03"])
    return str(tmp_path), np.array(list(gain.values()))


def test_interval_and_sign_flip_p_over_runs_match_the_equations(results):
    folder, gains = results
    assert study.main(["--results", folder]) == 0
    with open(os.path.join(folder, "paper_setting_over_runs.csv")) as handle:
        rows = {(r["regime"], r["method"]): r for r in csv.DictReader(handle)}
    row = rows[("cascade", "MULTR, a comma")]
    half = stats.t.ppf(0.975, 5) * gains.std(ddof=1) / np.sqrt(6)
    assert float(row["delta_vs_dla"]) == pytest.approx(gains.mean(), abs=1e-4)
    assert float(row["ci_low"]) == pytest.approx(gains.mean() - half, abs=1e-4)
    assert float(row["ci_high"]) == pytest.approx(gains.mean() + half, abs=1e-4)
    # exact sign flip over 6 pairs: 5 of 6 positive, one -0.001: the flips whose mean is at least as far from 0
    flips = np.array([[1 - 2 * ((k >> i) & 1) for i in range(6)] for k in range(64)])
    expected = np.mean(np.abs(flips @ gains) >= abs(gains.sum()) - 1e-12)
    assert float(row["p_runs"]) == pytest.approx(expected, abs=1e-4)
    assert row["p_holm"] == "0.03" and row["runs"] == "6"
    assert rows[("cascade", "DLA")]["delta_vs_dla"] == ""
    # one pair: no interval and no p (none could reach 0.05), the difference alone
    single = rows[("pbm", "MULTR, a comma")]
    assert float(single["delta_vs_dla"]) == pytest.approx(0.1) and single["ci_low"] == single["p_runs"] == ""
