"""The benchmark's click metrics on sessions computed by hand from their definitions (ultr-reproducibility's
``nll``, CLAX's per-rank perplexity)."""
from __future__ import annotations

import math

import pytest
import torch

from ultra_multr.click_metrics import ClickMetrics, ranker_log_click, session_click_nll

# Three sessions over 3 ranks: A shows ranks 1-3 (a click at 1), B ranks 1 and 3 (a gap at 2; a click at 3), C shows
# nothing.  P(click) per shown document:
PROBS = torch.tensor([[0.5, 0.25, 0.1], [0.8, 0.3, 0.5], [0.4, 0.4, 0.4]], dtype=torch.float64)
CLICKS = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
MASK = torch.tensor([[True, True, True], [True, False, True], [False, False, False]])


def test_click_nll_is_the_mean_over_sessions_of_each_sessions_mean_cross_entropy():
    a = -(math.log(0.5) + math.log(1 - 0.25) + math.log(1 - 0.1)) / 3
    b = -(math.log(1 - 0.8) + math.log(0.5)) / 2
    per_session = session_click_nll(torch.log(PROBS), CLICKS, MASK)
    assert per_session.tolist() == pytest.approx([a, b, 0.0], rel=1e-12)  # C shows nothing: 0, as upstream
    metrics = ClickMetrics(3)
    metrics.add(torch.log(PROBS), CLICKS, MASK)
    assert metrics.click_nll() == pytest.approx((a + b + 0.0) / 3, rel=1e-12)
    assert metrics.sessions == 3
    assert metrics.session_log_likelihood() == pytest.approx(-(3 * a + 2 * b) / 3, rel=1e-12)


def test_perplexity_is_clax_per_rank_then_the_mean_over_ranks():
    rank1 = 2 ** -((math.log2(0.5) + math.log2(1 - 0.8)) / 2)  # A and B show rank 1
    rank2 = 2 ** -math.log2(1 - 0.25)  # only A
    rank3 = 2 ** -((math.log2(1 - 0.1) + math.log2(0.5)) / 2)
    metrics = ClickMetrics(3)
    metrics.add(torch.log(PROBS), CLICKS, MASK)
    assert metrics.perplexity_per_rank() == pytest.approx([rank1, rank2, rank3], rel=1e-12)
    assert rank1 == pytest.approx(math.sqrt(10))  # 2 ** (log2(2) + log2(5)) / 2
    assert metrics.perplexity() == pytest.approx((rank1 + rank2 + rank3) / 3, rel=1e-12)
    assert metrics.shown_per_rank.tolist() == [2, 1, 2]


def test_batches_add_up_to_the_whole_and_a_rank_never_shown_is_left_out():
    whole, parts = ClickMetrics(4), ClickMetrics(4)
    probs = torch.cat([PROBS, torch.full((3, 1), 0.5, dtype=torch.float64)], dim=1)
    mask = torch.cat([MASK, torch.zeros(3, 1, dtype=torch.bool)], dim=1)
    clicks = torch.cat([CLICKS, torch.zeros(3, 1)], dim=1)
    whole.add(torch.log(probs), clicks, mask)
    for rows in (slice(0, 1), slice(1, 3)):
        parts.add(torch.log(probs[rows]), clicks[rows], mask[rows])
    for name in ("click_nll", "perplexity", "sessions", "log_likelihood", "shown_per_rank"):
        assert parts.as_dict()[name] == pytest.approx(whole.as_dict()[name], rel=1e-12)
    assert parts.perplexity_per_rank() == pytest.approx(whole.perplexity_per_rank(), rel=1e-12, nan_ok=True)
    assert math.isnan(whole.perplexity_per_rank()[3])
    assert whole.perplexity() == pytest.approx(sum(whole.perplexity_per_rank()[:3]) / 3)


def test_nothing_is_clipped_a_sure_wrong_prediction_costs_infinity():
    metrics = ClickMetrics(1)
    metrics.add(torch.zeros(1, 1, dtype=torch.float64), torch.zeros(1, 1), torch.ones(1, 1, dtype=torch.bool))
    assert metrics.click_nll() == math.inf  # P(click) = 1, no click
    tiny = ClickMetrics(1)
    tiny.add(torch.full((1, 1), -50.0, dtype=torch.float64), torch.ones(1, 1), torch.ones(1, 1, dtype=torch.bool))
    assert tiny.click_nll() == pytest.approx(50.0)  # P(click) = e^-50, far below any clipping floor


def test_a_ranker_with_an_examination_clicks_with_their_product():
    scores = torch.tensor([[0.0, 2.0, -1.0]])
    examination = torch.tensor([1.0, 0.5, 0.25])
    sigmoid = [0.5, 1 / (1 + math.exp(-2.0)), 1 / (1 + math.exp(1.0))]
    expected = [math.log(e * s) for e, s in zip([1.0, 0.5, 0.25], sigmoid)]
    assert ranker_log_click(scores, examination)[0].tolist() == pytest.approx(expected, rel=1e-12)


def test_shapes_that_do_not_fit_are_refused():
    with pytest.raises(ValueError, match="click metrics of 3 ranks"):
        ClickMetrics(3).add(torch.zeros(2, 4), torch.zeros(2, 4), torch.ones(2, 4, dtype=torch.bool))
