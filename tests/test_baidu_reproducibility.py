"""The one command of studies/baidu_reproducibility (issue 41) on a generated release-layout log with positions up to
30 and about half of the sessions without a click: every row kept, the click metric equal to a hand computation,
the table in the published layout."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO_ROOT, require, require_ultra

pytestmark = pytest.mark.slow  # the command starts main.py

require("pyarrow")
require_ultra()

from ultra_multr.algorithms.examination import checkpoint_examination  # noqa: E402
from ultra_multr.click_logs import baidu  # noqa: E402
from ultra_multr.click_logs.baidu_convert import heldout_rows  # noqa: E402
from ultra_multr.compat.runtime import score_documents  # noqa: E402
from ultra_multr.experiments.evaluate import load_ranker  # noqa: E402

SCRIPT = os.path.join(REPO_ROOT, "studies", "baidu_reproducibility", "run.py")


def test_the_one_command_on_a_log_with_30_positions_and_half_the_sessions_without_a_click(tmp_path):
    import torch

    out = tmp_path / "study"
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1",
               ULTRA_MULTR_PROGRESS="off")
    done = subprocess.run(
        [sys.executable, SCRIPT, "--out", str(out), "--generate", "features", "--queries", "40", "--sessions", "400",
         "--sessions-per-file", "200", "--heldout", "160", "--annotated", "20", "--steps", "2", "--checkpoint-every",
         "2", "--seeds", "0", "--simulator-steps", "2", "--methods", "naive", "pal", "multr", "--workers", "2",
         # MULTR's simulator on a log this small: its guards would leave it untrained (MULTR then trains as DLA)
         "--multr-hparams", "logger_guard=none,simulator_min_heldout_sessions=1"],
        env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]

    # the log: positions up to 30, about half of the sessions without a click
    train = baidu.log_files([str(out / "log" / "parts" / "part-1_split-*.feather")])
    heldout = [str(out / "log" / "parts" / "part-0_split-0.feather")]
    logged = [baidu.read_sessions(path, top_n=None) for path in train]
    deepest = max(int(s.positions.max()) for s in logged)
    clickless = np.mean(np.concatenate([s.clicks.sum(1) == 0 for s in logged]))
    assert deepest == 30 and 0.35 < clickless < 0.65
    # every row kept: the protocol's N is the deepest position, so no document is cut
    conversion = json.loads((out / "data" / "baidu_conversion.json").read_text())
    assert conversion["top_n"] == 30 and conversion["protocol"] == "reproducibility"
    assert sum(int(s.mask.sum()) for s in logged) == sum(
        int(baidu.read_sessions(path, top_n=conversion["top_n"]).mask.sum()) for path in train)
    # Naive is fed the sessions with a click (its listwise loss gives the others no weight), PAL every session
    table = json.loads((out / "results" / "table.json").read_text())
    assert table["pal"]["left_out"] == "0.0 %"
    assert float(table["naive"]["left_out"].rstrip(" %")) == pytest.approx(100 * clickless, abs=12)

    # PAL's click NLL by hand: P(click at rank r) = sigmoid(position logit r) * sigmoid(score), per-document
    # cross-entropy averaged per session, then over the test half of the held-out sessions
    run_dir = out / "runs" / "baidu_ultr" / "features" / "repro_pal" / "seed0"
    settings = json.loads((run_dir / "settings.json").read_text())
    model_dir = str(run_dir / "model")
    examination = checkpoint_examination(os.path.join(model_dir, "ultra_multr.PAL.ckpt"))
    ranker = load_ranker(settings, model_dir, 12)
    sessions = baidu.read_sessions(heldout[0], top_n=30)
    rows = heldout_rows(heldout, 381, "test")[heldout[0]]
    per_session = []
    for row in rows:
        shown = np.flatnonzero(sessions.mask[row])
        with torch.no_grad():
            scores = score_documents(ranker, torch.from_numpy(sessions.features[row, shown])).double().numpy()
        p = examination[shown] / (1.0 + np.exp(-scores))
        c = sessions.clicks[row, shown]
        per_session.append(-np.mean(c * np.log(p) + (1 - c) * np.log(1 - p)))
    pal = table["pal"]["runs"][0]["clicks"]["ultra_multr.PAL"]
    assert pal["sessions"] == len(rows)
    assert pal["click_nll"] == pytest.approx(np.mean(per_session), rel=1e-6)

    # the published layout: the rows that ran in its order, its columns, MULTR's simulator, the published figures
    markdown = (out / "results" / "table.md").read_text()
    assert ("| method | runs | nDCG@10 | MRR@10 | DCG@1 | DCG@3 | DCG@5 | DCG@10 | click NLL | perplexity | left out "
            "| selected step | trained as |") in markdown
    rows_found = [line.split(" | ")[0][2:] for line in markdown.splitlines() if line.startswith("| ")]
    assert rows_found[1:6] == ["Naive", "PAL", "MULTR", "MULTR simulator", "position CTR"]
    assert "**Published, real Baidu-ULTR: not comparable with a generated log.**" in markdown
    assert "| Listwise DLA | 0.377 | 0.615 | 1.796 | 3.73 | 5.125 | 7.802 | - |" in markdown
    assert "4b7ea0e4226d1fff93468964c700ea193052ca3f" in markdown
