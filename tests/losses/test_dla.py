"""DLA's weights without overflow: relative_ipw_weights gives DLA's softmax loss its value wherever the plain
weights are finite, and a finite loss where exp(s_1 - s_k) overflows float32 (DLA then stopped on a non-finite
examination loss: studies/baidu_raw_features)."""
from __future__ import annotations

import pytest
import torch

from ultra_multr import losses


def lists(spread: float = 3.0, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(6, 5, generator=generator) * spread
    mask = torch.ones(6, 5, dtype=torch.bool)
    mask[0, 3:] = False
    mask[4, 2:] = False
    clicks = (torch.rand(6, 5, generator=generator) < 0.4).float() * mask
    logits = torch.randn(6, 5, generator=generator)
    return scores, mask, clicks, logits


@pytest.mark.parametrize("kind", losses.PROBABILITY_FUNCTIONS)
@pytest.mark.parametrize("max_weight", [-1.0, 3.0])
def test_the_loss_is_unchanged_where_the_plain_weights_are_finite(kind, max_weight):
    scores, mask, clicks, logits = lists()
    plain = losses.ipw_weights(losses.logits_to_probability(scores, mask, kind), mask, max_weight)
    relative = losses.relative_ipw_weights(scores, mask, kind, max_weight)
    factor = plain[mask] / relative[mask]
    torch.testing.assert_close(factor, torch.full_like(factor, float(factor[0])))  # one factor for the batch
    assert float(relative.max()) == pytest.approx(1.0) and bool((relative[~mask] == 0).all())
    torch.testing.assert_close(losses.dla_softmax_loss(logits, clicks, relative, mask),
                               losses.dla_softmax_loss(logits, clicks, plain, mask))


def test_widely_spread_scores_give_a_finite_loss_where_the_plain_weights_give_nan():
    scores, mask, clicks, logits = lists(spread=60.0)  # differences of up to a few hundred: over float32, not float64
    plain = losses.ipw_weights(losses.logits_to_probability(scores, mask), mask)
    assert not torch.isfinite(losses.dla_softmax_loss(logits, clicks, plain, mask))
    relative = losses.relative_ipw_weights(scores, mask)
    loss = losses.dla_softmax_loss(logits, clicks, relative, mask)
    assert torch.isfinite(loss)
    # the same loss as in float64, where these weights do not overflow
    exact = losses.dla_softmax_loss(logits.double(), clicks.double(),
                                     losses.ipw_weights(losses.logits_to_probability(scores.double(), mask), mask),
                                     mask)
    assert torch.isfinite(exact) and float(loss) == pytest.approx(float(exact), rel=1e-4)
