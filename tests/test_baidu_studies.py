"""The studies on Baidu-layout logs (issue 27): the propensity figure's table on a tiny generated log."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import require

pytestmark = pytest.mark.slow  # every test here starts a process

require("pyarrow")
require("pandas")
require("matplotlib")
require("ultr_bias_toolkit")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "studies", "baidu_propensities", "run.py")
PUBLISHED = os.path.join(REPO, "studies", "baidu_propensities", "published_global_all_pairs.csv")


def test_propensity_table_on_a_tiny_generated_log(tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, SCRIPT, "--log-dir", str(tmp_path / "log"), "--out", str(tmp_path / "work"),
                           "--results", str(results), "--generate", "300", "--model-dirs"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(results / "propensities.csv") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["position", "true", "AdjacentChain", "AllPairs", "published AllPairs (Baidu-ULTR)"]
    body = rows[1:11]
    assert [int(r[0]) for r in body] == list(range(1, 11))
    table = np.array([[float(v) for v in r[1:]] for r in body])
    assert np.allclose(table[0], 1.0)  # every curve relative to position 1
    np.testing.assert_allclose(table[:, 0], 1.0 / np.arange(1, 11), atol=1e-4)  # the generator's examination 1/k
    published = np.loadtxt(PUBLISHED, delimiter=",", skiprows=1)
    np.testing.assert_allclose(table[:, 3], published[:10, 1] / published[0, 1], atol=1e-4)
    assert rows[11][0] == "max abs error vs true" and float(rows[11][4]) == pytest.approx(
        np.abs(table[:, 3] - table[:, 0]).max(), abs=2e-4)
    assert (results / "propensities.png").stat().st_size > 10000
    record = json.loads((results / "propensities.json").read_text())
    assert record["documents"] > 1000 and "78d8060" in record["published_source"]
    # the harvested curves fall with the position on a PBM log (coarsely: 300 sessions)
    assert table[1, 1] < 0.8 and table[1, 2] < 0.8
