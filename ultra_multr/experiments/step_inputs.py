"""The random batch and the ULTRA settings that the step benchmarks train on.

Shared by ``benchmarks/step_time.py`` (step time and peak memory) and ``benchmarks/profile_step.py`` (where a
step's time goes), so that both measure the same batch and models.
"""
from __future__ import annotations

import numpy as np


def input_feed(batch_size: int, list_size: int, features: int, seed: int = 0) -> dict:
    """A ULTRA input feed of random documents with cascade-like clicks."""
    rng = np.random.default_rng(seed)
    feed = {"letor_features": rng.uniform(-1, 1, (batch_size * list_size, features)).astype(np.float32)}
    first_click = rng.integers(0, list_size, batch_size)
    for i in range(list_size):
        feed["docid_input%d" % i] = (np.arange(batch_size) * list_size + i).astype(np.float32)
        feed["label%d" % i] = (first_click == i).astype(np.float32)
    return feed


def settings(algorithm: str, hparams: str, list_size: int) -> dict:
    """ULTRA settings of ``algorithm`` with ``hparams`` over lists of ``list_size`` (DNN [512, 256, 128])."""
    return {
        "train_input_feed": "ultra_multr.feeds.ClickSimulationFeed",
        "train_input_hparams": "",
        "ranking_model": "ultra.ranking_model.DNN",
        "ranking_model_hparams": "hidden_layer_sizes=[512,256,128]",
        "learning_algorithm": algorithm,
        "learning_algorithm_hparams": hparams,
        "max_candidate_num": list_size,
        "selection_bias_cutoff": list_size,
        "metrics": ["ndcg"],
        "metrics_topn": [10],
    }
