"""DLA as main.py builds it keeps training when its ranker's scores spread widely within a list (a large first
Adagrad step on features without normalisation): its examination loss's weights exp(s_1 - s_k) overflowed float32
there, and the run stopped on a non-finite loss (studies/baidu_raw_features)."""
from __future__ import annotations

import math

import torch

from conftest import require_ultra
from algorithm_setup import build

ultra = require_ultra()


def test_a_ranker_with_widely_spread_scores_still_gives_a_finite_examination_loss(synthetic_data_dir):
    dla, feed, data = build(synthetic_data_dir, "seed=0,device=cpu,log_every=0", algorithm="ultra_multr.DLA")
    last = [m for m in dla.model.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        last.weight.mul_(1e4)
    input_feed, _ = feed.get_batch(data, check_validation=True)
    batch = dla.batch(input_feed, dla.rank_list_size)
    with torch.no_grad():
        scores = dla.scores(batch)
    spread = (scores.masked_fill(~batch.mask, -math.inf).amax(1) - scores.masked_fill(~batch.mask, math.inf).amin(1))
    assert float(spread.max()) > 100  # exp(100) is beyond float32
    loss, _, _ = dla.train(input_feed)
    _, parts = dla.training_loss(batch)
    assert math.isfinite(loss) and math.isfinite(parts["exam_loss"])
