"""Intervention sessions' orders: the swapped pair and the shuffles are uniform, padding never moves."""
import itertools

import numpy as np
import pytest
import torch

from ultra_multr import interventions


def draw(mask_row, kind, rows=12000, share=1.0, seed=0):
    mask = torch.tensor([mask_row] * rows, dtype=torch.bool)
    return interventions.draw_interventions(mask, share, kind, torch.Generator().manual_seed(seed))


def test_the_swapped_pair_is_uniform_over_the_adjacent_real_pairs():
    order, codes = draw([1, 1, 0, 1, 1, 1], "swap")  # pairs (0, 1), (3, 4), (4, 5)
    frequencies = np.bincount(codes.numpy(), minlength=6) / len(codes)
    assert np.all(np.abs(frequencies[[0, 3, 4]] - 1 / 3) < 4.5 * np.sqrt(2 / 9 / len(codes)))
    assert frequencies[[1, 2, 5]].sum() == 0
    for k in (0, 3, 4):
        expected = list(range(6))
        expected[k], expected[k + 1] = k + 1, k
        assert (order[codes == k] == torch.tensor(expected)).all()


def test_a_shuffle_is_uniform_over_the_orders_of_the_real_documents_and_padding_stays():
    order, codes = draw([1, 0, 1, 1], "shuffle")
    assert (codes == interventions.SHUFFLED).all() and (order[:, 1] == 1).all()
    seen = {}
    for row in order.tolist():
        seen[tuple(row)] = seen.get(tuple(row), 0) + 1
    expected = {(p[0], 1, p[1], p[2]) for p in itertools.permutations([0, 2, 3])}
    assert set(seen) == expected
    share = np.array(list(seen.values())) / len(order)
    assert np.all(np.abs(share - 1 / 6) < 4.5 * np.sqrt(5 / 36 / len(order)))


@pytest.mark.parametrize("kind", interventions.KINDS)
def test_lists_that_cannot_be_perturbed_are_shown_as_logged(kind):
    mask_row = [1, 0, 1, 0] if kind == "swap" else [0, 0, 1, 0]
    order, codes = draw(mask_row, kind, rows=50)
    assert (codes == interventions.LOGGED).all() and (order == torch.arange(4)).all()
    order, codes = draw([1, 1, 1, 1], kind, rows=200, share=0.0)
    assert (codes == interventions.LOGGED).all() and (order == torch.arange(4)).all()


def test_the_derived_generator_follows_the_state_and_does_not_advance_it():
    generator = torch.Generator().manual_seed(3)
    state = generator.get_state()
    first = torch.rand(4, generator=interventions.derived_generator(generator))
    assert torch.equal(generator.get_state(), state)
    assert torch.equal(torch.rand(4, generator=interventions.derived_generator(generator)), first)
    torch.rand(1, generator=generator)
    assert not torch.equal(torch.rand(4, generator=interventions.derived_generator(generator)), first)


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="intervention must be one of swap, shuffle, got 'swapp'"):
        draw([1, 1], "swapp", rows=2)
