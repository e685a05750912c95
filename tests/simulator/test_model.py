"""The user simulator is the paper's network, masks padding and round-trips."""
from __future__ import annotations

import pytest
import torch

from ultra_multr.randomization import random_permutations
from ultra_multr.simulator import (
    CLICK,
    SKIP,
    UNKNOWN,
    ContextAwareUserSimulator,
    SimulatorConfig,
    check_compatible,
    click_log_likelihood,
    load_simulator,
    save_simulator,
    simulator_loss,
)


def make(cell="lstm", features=12, slots=6, seed=0, **kwargs):
    torch.manual_seed(seed)
    return ContextAwareUserSimulator(SimulatorConfig(feature_size=features, list_size=slots, cell=cell, **kwargs))


def reference_logits(sim, features, clicks):
    """The paper's equations with torch's own nn.LSTM / nn.LSTMCell (or the GRU
    versions), no padding."""
    recurrent = torch.nn.LSTM if sim.config.cell == "lstm" else torch.nn.GRU
    encoder = recurrent(features.shape[-1], sim.config.hidden_size, bidirectional=True, batch_first=True)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(encoder, name + "_l0").copy_(getattr(sim.encoder_forward.cell, name))
            getattr(encoder, name + "_l0_reverse").copy_(getattr(sim.encoder_backward.cell, name))
        _, h_n = encoder(features)
        h_n = h_n[0] if sim.config.cell == "lstm" else h_n
        z_pi = sim.context_projection(sim.context(torch.cat([h_n[0], h_n[1]], dim=-1)))
        batch, slots, _ = features.shape
        state = None
        previous = torch.full((batch,), UNKNOWN, dtype=torch.long)
        logits = []
        for t in range(slots):
            z_t = torch.cat(
                [
                    z_pi,
                    sim.document_projection(features[:, t]),
                    sim.action_projection(sim.action_embedding(previous)),
                    sim.position_embedding.weight[t].expand(batch, -1),
                ],
                dim=-1,
            )
            state = sim.decoder.cell(z_t, state)
            hidden = state[0] if sim.config.cell == "lstm" else state
            logits.append(sim.click_head(hidden).squeeze(-1))
            previous = torch.where(clicks[:, t] > 0, CLICK, SKIP)
        return torch.stack(logits, dim=1)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_simulator_is_the_papers_bidirectional_encoder_and_decoder(cell):
    sim = make(cell)
    features = torch.randn(5, 6, 12)
    clicks = (torch.rand(5, 6) < 0.4).float()
    mask = torch.ones(5, 6, dtype=torch.bool)
    actual = sim.click_logits(features, mask, clicks)
    assert torch.allclose(actual, reference_logits(sim, features, clicks), atol=1e-5)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_padding_does_not_change_the_real_slots(cell):
    sim = make(cell, input_mlp=(8,))
    features = torch.randn(3, 4, 12)
    clicks = torch.tensor([[1.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1]])
    short = sim.click_logits(features, torch.ones(3, 4, dtype=torch.bool), clicks)
    padded_features = torch.cat([features, torch.randn(3, 2, 12)], dim=1)  # garbage in padded slots
    padded_mask = torch.cat([torch.ones(3, 4, dtype=torch.bool), torch.zeros(3, 2, dtype=torch.bool)], dim=1)
    padded_clicks = torch.cat([clicks, torch.ones(3, 2)], dim=1)
    padded = sim.click_logits(padded_features, padded_mask, padded_clicks)
    assert torch.allclose(padded[:, :4], short, atol=1e-6)


def test_sampled_clicks_never_hit_padding_and_follow_the_probabilities():
    sim = make(features=4, slots=3)
    with torch.no_grad():
        sim.click_head.bias.fill_(2.0)  # clicks likely everywhere
    features = torch.randn(2, 3, 4)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    generator = torch.Generator().manual_seed(0)
    orders = torch.cat([torch.arange(3).expand(2, 1, 3), random_permutations(mask, 2000, generator)], dim=1)
    with torch.no_grad():
        clicks = sim.sample_clicks(features, mask, orders, generator)
    assert clicks[0, :, 2].sum() == 0
    assert clicks.sum() > 0
    # The first position's click rate equals its (order-dependent) probability on average.
    with torch.no_grad():
        p_first = torch.sigmoid(sim.click_logits(features, mask, torch.zeros(2, 3))[:, 0])
    observed_rate = clicks[1, 1:, 0].mean()  # random orders of query 1
    assert 0.5 < observed_rate < 1.0 and p_first[1] > 0.5


def test_sampled_sessions_follow_the_autoregressive_click_probabilities():
    # P(c1) = sigmoid(l1); P(c2) = P(c1) sigmoid(l2 | c1) + (1 - P(c1)) sigmoid(l2 | no c1).
    sim = make(features=4, slots=3, seed=3)
    features = torch.randn(1, 3, 4)
    mask = torch.ones(1, 3, dtype=torch.bool)
    with torch.no_grad():
        after_skip = torch.sigmoid(sim.click_logits(features, mask, torch.zeros(1, 3)))[0]
        after_click = torch.sigmoid(sim.click_logits(features, mask, torch.tensor([[1.0, 0, 0]])))[0]
        samples = 40000
        orders = torch.arange(3).expand(1, samples, 3)  # the same list, many sessions
        clicks = sim.sample_clicks(features, mask, orders, torch.Generator().manual_seed(1))[0]
    p1 = after_skip[0]
    p2 = p1 * after_click[1] + (1 - p1) * after_skip[1]
    tolerance = 4 * (0.25 / samples) ** 0.5
    assert abs(clicks[:, 0].mean() - p1) < tolerance
    assert abs(clicks[:, 1].mean() - p2) < tolerance
    assert abs(clicks[:, 1][clicks[:, 0] == 1].mean() - after_click[1]) < 2 * tolerance


def test_teacher_forcing_ratio_feeds_the_observed_click_that_often():
    # The simulator never clicks by itself, so a click fed back at position 1
    # can only be the observed one; the logit at position 2 tells which was fed.
    sim = make(features=4, slots=2, seed=4)
    with torch.no_grad():
        sim.click_head.bias.fill_(-60.0)
    features = torch.randn(1, 2, 4).expand(4000, -1, -1)
    mask = torch.ones(4000, 2, dtype=torch.bool)
    clicks = torch.tensor([1.0, 0.0]).expand(4000, -1)

    def second_logits(ratio):
        with torch.no_grad():
            logits = sim.click_logits(features, mask, clicks, ratio, torch.Generator().manual_seed(0))
        return logits[:, 1]

    forced, free, mixed = second_logits(1.0), second_logits(0.0), second_logits(0.3)
    assert not torch.isclose(forced[0], free[0])
    fed_observed = torch.isclose(mixed, forced)
    assert bool((fed_observed | torch.isclose(mixed, free)).all())
    assert abs(fed_observed.float().mean().item() - 0.3) < 0.03


def test_sampling_in_chunks_of_lists_keeps_every_query_with_its_own_documents():
    # Huge click-head weights make every click (almost surely) deterministic,
    # so chunked and unchunked sampling must agree exactly, list by list.
    sim = make(features=5, slots=4, seed=5)
    with torch.no_grad():
        sim.click_head.weight.mul_(1000.0)
    features = torch.randn(7, 4, 5)
    mask = torch.ones(7, 4, dtype=torch.bool)
    mask[2, 3] = mask[5, 2:] = False
    permutations = random_permutations(mask, 3, torch.Generator().manual_seed(0))
    orders = torch.cat([torch.arange(4).expand(7, 1, 4), permutations], dim=1)
    with torch.no_grad():
        whole = sim.sample_clicks(features, mask, orders, torch.Generator().manual_seed(1), lists_per_chunk=10**6)
        chunked = sim.sample_clicks(features, mask, orders, torch.Generator().manual_seed(2), lists_per_chunk=5)
    assert whole.shape == (7, 4, 4)
    assert torch.equal(whole, chunked)
    assert 0 < whole.sum() < whole.numel()


def test_loss_adds_l2_and_gradients_reach_every_parameter():
    sim = make()
    features = torch.randn(4, 6, 12)
    mask = torch.ones(4, 6, dtype=torch.bool)
    clicks = (torch.rand(4, 6) < 0.3).float()
    logits = sim.click_logits(features, mask, clicks)
    plain = simulator_loss(sim, logits, clicks, mask, 0.0)
    regularised = simulator_loss(sim, logits, clicks, mask, 0.1)
    l2 = sum((p * p).sum() for p in sim.parameters())
    assert regularised.item() == pytest.approx(plain.item() + 0.1 * l2.item(), rel=1e-5)
    assert plain.item() == pytest.approx(-click_log_likelihood(logits, clicks, mask).sum(1).mean().item())
    regularised.backward()
    assert all(p.grad is not None for p in sim.parameters())


def test_checkpoint_round_trip_and_compatibility(tmp_path):
    sim = make(cell="gru", input_mlp=(5,))
    path = str(tmp_path / "sim.ckpt")
    save_simulator(path, sim, {"steps": 3})
    loaded, metadata = load_simulator(path)
    assert metadata == {"steps": 3} and loaded.config == sim.config
    features, mask, clicks = torch.randn(2, 6, 12), torch.ones(2, 6, dtype=torch.bool), torch.zeros(2, 6)
    assert torch.equal(loaded.click_logits(features, mask, clicks), sim.click_logits(features, mask, clicks))
    with pytest.raises(ValueError, match="feature size 12 does not match the data's 13"):
        check_compatible(loaded.config, 13, 6, path)
    with pytest.raises(ValueError, match="list size 6 is shorter than the data's 10"):
        check_compatible(loaded.config, 12, 10, path)


def test_unknown_cell_is_refused():
    with pytest.raises(ValueError, match="cell must be one of"):
        SimulatorConfig(feature_size=3, list_size=2, cell="rnn")


def test_a_position_size_of_zero_is_the_papers_decoder_without_a_position_embedding():
    """simulator_position_size=0 (settings/multr_paper.json): the decoder reads [W1 h; W2 x; W3 a] alone, as the
    paper's Eq. click_decoder, and knows the position only through its recurrence."""
    config = SimulatorConfig(feature_size=4, list_size=5, hidden_size=8, position_size=0)
    simulator = ContextAwareUserSimulator(config)
    assert sum(p.numel() for p in simulator.position_embedding.parameters()) == 0
    assert simulator.decoder.cell.weight_ih.shape[1] == 3 * 8
    features, mask = torch.randn(2, 5, 4), torch.ones(2, 5, dtype=torch.bool)
    logits = simulator.click_logits(features, mask, torch.zeros(2, 5))
    assert logits.shape == (2, 5) and torch.isfinite(logits).all()
    with pytest.raises(ValueError, match="position_size must be >= 0, got -1"):
        SimulatorConfig(feature_size=4, list_size=5, position_size=-1)
