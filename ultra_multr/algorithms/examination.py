"""The examination a trained ranker clicks with, recorded beside main.py's ranker checkpoint.

A ranker-plus-examination model predicts ``P(click at rank r) = e_r * sigmoid(score)``
(:func:`ultra_multr.click_metrics.ranker_log_click`), the click model the Baidu-ULTR benchmark's click
metric scores.  main.py saves the ranker alone (``<model_dir>/<learning_algorithm>.ckpt``, at the steps
whose validation improved); our algorithms that have an examination (:meth:`PluginAlgorithm.click_examination
<ultra_multr.algorithms.base.PluginAlgorithm.click_examination>`) write it for every step main.py validates, in
``<checkpoint>.examination.json`` (``{"by_step": {step: [e_1, ..., e_N]}}``, written atomically), and
:func:`checkpoint_examination` takes the one of the step whose ranker the checkpoint holds (its
``.progress.json``, :mod:`ultra_multr.compat.progress`).
"""
from __future__ import annotations

import json
import os
from typing import Sequence

import numpy as np

from ultra_multr.compat.progress import PROGRESS_SUFFIX
from ultra_multr.files import atomic_write_text, read_json

EXAMINATION_SUFFIX = ".examination.json"


def record_examination(checkpoint: str, step: int, examination: Sequence[float]) -> None:
    """Add the examination [N] of ``step`` (the ranker main.py may save after validating it) to the record."""
    path = checkpoint + EXAMINATION_SUFFIX
    record = read_json(path, "examination record") if os.path.isfile(path) else {"by_step": {}}
    record["by_step"][str(int(step))] = [float(value) for value in examination]
    atomic_write_text(path, json.dumps(record, indent=1, sort_keys=True) + "\n")


def checkpoint_examination(checkpoint: str) -> np.ndarray:
    """[N] the examination recorded for the step whose ranker ``checkpoint`` holds.

    Raises:
        ValueError: no record (the algorithm has no examination, or did not train through main.py), or no
            recorded step for the checkpoint, naming the files.
    """
    path = checkpoint + EXAMINATION_SUFFIX
    if not os.path.isfile(path):
        raise ValueError("%s is missing: the ranker of %s has no examination recorded (trained by an algorithm "
                         "without one, or not through main.py)" % (path, checkpoint))
    progress = read_json(checkpoint + PROGRESS_SUFFIX, "training progress record")
    step = progress.get("checkpoint_step")
    by_step = read_json(path, "examination record")["by_step"]
    if step is None or str(step) not in by_step:
        raise ValueError("%s records the step of %s as %s, and %s holds no examination of that step (it holds "
                         "steps %s)" % (checkpoint + PROGRESS_SUFFIX, checkpoint, step, path,
                                        ", ".join(sorted(by_step, key=int)) or "none"))
    return np.asarray(by_step[str(step)], dtype=np.float64)
