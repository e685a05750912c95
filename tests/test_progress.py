"""Progress with rate and time left, without tqdm (issue 27, item 7)."""
from __future__ import annotations

import builtins

import pytest

from ultra_multr import progress as progress_module
from ultra_multr.progress import Progress, format_seconds, progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_lines_give_count_rate_and_time_left_without_tqdm(monkeypatch):
    real_import = builtins.__import__

    def no_tqdm(name, *args, **kwargs):
        if name == "tqdm" or name.startswith("tqdm."):
            raise ImportError("no tqdm here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    monkeypatch.delenv(progress_module.ENV, raising=False)
    clock, lines = Clock(), []
    meter = Progress(1000, "user simulator", "steps", every_s=30, clock=clock, log=lines.append)
    assert meter.bar is None and meter.lines  # auto without tqdm: log lines
    for _ in range(100):
        clock.now += 0.25  # 4 steps per second
        meter.update()
    # a line every 30 s: at 30 s (120 steps) none yet at 25 s
    assert lines == []
    for _ in range(20):
        clock.now += 0.25
        meter.update()
    assert lines == ["user simulator: 120/1000 steps (12%), 4 steps/s, 0:03:40 left, 0:00:30 elapsed"]
    clock.now += 1
    meter.update(4)
    meter.close()  # the last count, said once
    assert len(lines) == 2 and lines[-1].startswith("user simulator: 124/1000 steps")
    meter.close()
    assert len(lines) == 2


def test_text_for_a_callers_own_lines_and_a_resumed_count():
    clock, lines = Clock(), []
    meter = Progress(200, "x", "steps", initial=50, mode="lines", log_lines=False, clock=clock, log=lines.append)
    clock.now += 10
    meter.set(70)  # 20 steps in 10 s since the resume
    assert meter.text() == "2 steps/s, 0:01:05 left, 0:00:10 elapsed"
    meter.close()
    assert lines == []  # the caller logs
    assert Progress(None, "y", mode="lines", clock=clock).text() == "0 steps/s, 0:00:00 elapsed"


def test_iterable_wrapper_and_off_mode(monkeypatch):
    lines = []
    assert list(progress([1, 2, 3], desc="files", unit="files", mode="lines", every_s=0, log=lines.append)) == [1, 2, 3]
    assert [line.split(",")[0] for line in lines] == ["files: 1/3 files (33%)", "files: 2/3 files (67%)",
                                                     "files: 3/3 files (100%)"]  # the end is said once
    monkeypatch.setenv(progress_module.ENV, "off")
    quiet = []
    assert list(progress(range(3), log=quiet.append, every_s=0)) == [0, 1, 2] and quiet == []
    monkeypatch.setenv(progress_module.ENV, "bogus")
    with pytest.raises(ValueError, match="ULTRA_MULTR_PROGRESS"):
        Progress(3, "z")
    assert format_seconds(3725) == "1:02:05" and format_seconds(float("nan")) == "?"


def test_tqdm_is_used_where_installed(monkeypatch):
    pytest.importorskip("tqdm")
    monkeypatch.delenv(progress_module.ENV, raising=False)
    meter = Progress(3, "runs", "runs")
    assert meter.bar is not None and not meter.lines
    meter.update(3)
    meter.close()
