"""ultra_multr.experiments.trec: TREC run and qrels files."""
import os

import numpy as np
import pytest

from ultra_multr.experiments.trec import format_qrels, format_run, write_run


def test_trec_run_and_qrels_format(tmp_path):
    text = format_run([("q1", ["d1", "d2", "d3"], np.array([0.5, 2.0, 0.5]))], tag="dla_seed0")
    assert text.splitlines() == [
        "q1 Q0 d2 1 2 dla_seed0",
        "q1 Q0 d1 2 0.5 dla_seed0",  # tie: input order kept
        "q1 Q0 d3 3 0.5 dla_seed0",
    ]
    assert "tensor" not in text
    assert format_qrels([("q1", ["d1", "d2"], np.array([2.0, 0.0]))]) == "q1 0 d1 2\nq1 0 d2 0\n"
    with pytest.raises(ValueError, match="whitespace"):
        format_run([("q1", ["d 1"], np.array([1.0]))], tag="t")
    with pytest.raises(ValueError, match="integers"):
        format_qrels([("q1", ["d1"], np.array([0.5]))])
    path = tmp_path / "run.trec"
    write_run(str(path), [("q2", ["a"], np.array([1.0]))], tag="t")
    assert path.read_text() == "q2 Q0 a 1 1 t\n"
    assert os.listdir(tmp_path) == ["run.trec"]  # no temporary file left
