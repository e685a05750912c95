"""ultra_multr.tensorboard: one writer per process, a no-op without one."""
from __future__ import annotations

import pytest

from ultra_multr import tensorboard


def test_scalar_is_a_no_op_without_a_writer_and_logs_with_one(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert tensorboard.log_dir() is None
    tensorboard.scalar("simulator/loss", 0.5, 1)  # nothing open: nothing written, no error
    try:
        tensorboard.open_writer(str(tmp_path / "train_log"))
        assert tensorboard.open_writer(str(tmp_path / "train_log")) is not None  # same dir: same writer
        with pytest.raises(ValueError, match="already open in"):
            tensorboard.open_writer(str(tmp_path / "elsewhere"))
        for step, (loss, ll) in enumerate([(0.9, -2.0), (0.7, -1.6)], start=1):
            tensorboard.scalar("simulator/loss", loss, step)
            tensorboard.scalars("simulator", {"heldout_log_likelihood": ll}, step)
    finally:
        tensorboard.close()
    assert tensorboard.log_dir() is None
    events = EventAccumulator(str(tmp_path / "train_log"))
    events.Reload()
    assert [(e.step, round(e.value, 6)) for e in events.Scalars("simulator/loss")] == [(1, 0.9), (2, 0.7)]
    assert [round(e.value, 6) for e in events.Scalars("simulator/heldout_log_likelihood")] == [-2.0, -1.6]
    assert not (tmp_path / "elsewhere").exists()
