"""How well the learner's features predict the logged order: a label-free check of the logging ranker.

A click model fitted to a log whose logging ranker ordered the documents by
relevance that no feature carries (a production ranker that knows more than
the learner) absorbs that relevance into position: MULTR's user simulator
then imputes clicks from it on re-ranked lists (the **stress** group of our
studies).  In ULTRA's recipe (the paper's setting) the logger is a Rank SVM on
the features the learner sees, so the logged order is a function of them.

:func:`logged_order_fit` tells the two apart from the log alone, without a
label: a small ranker (one hidden layer) is fitted to the logged order of most
training queries with a pairwise logistic loss, and on the other queries it
counts the share of document pairs it orders as the logger did.  The lists'
features are standardised first.  Everything random comes from the caller's
generator; the global generators are left alone.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class OrderFit:
    """The fitted ranker's agreement with the logged order on held-out queries.

    Attributes:
        agreement: share of the held-out pairs of shown documents it orders as the logger did (0.5: chance).
        heldout_queries: queries held out.
        heldout_pairs: their pairs of shown documents.
    """

    agreement: float
    heldout_queries: int
    heldout_pairs: int


def pair_mask(mask: torch.Tensor) -> torch.Tensor:
    """[Q, N, N] bool: (i, j) with i logged above j (i < j), both shown, of mask [Q, N] bool."""
    slots = mask.shape[1]
    upper = torch.ones(slots, slots, dtype=torch.bool, device=mask.device).triu(1)
    return mask[:, :, None] & mask[:, None, :] & upper


def logged_order_fit(
    features: torch.Tensor,
    mask: torch.Tensor,
    generator: torch.Generator,
    heldout_fraction: float = 0.2,
    steps: int = 300,
    hidden: int = 32,
    batch_queries: int = 256,
    learning_rate: float = 0.01,
) -> OrderFit:
    """Fit a ranker to the logged order of some queries and measure its agreement on the others.

    Args:
        features: [Q, N, F] float32, each list in its logged order (slot 0 on top); any values at padded slots.
        mask: [Q, N] bool, True where a document was shown.
        generator: CPU generator for the held-out split, the initial weights and the batches.
        heldout_fraction: share of the queries held out (at least one query each way).

    Returns:
        The agreement on the held-out queries' pairs.

    Raises:
        ValueError: fewer than 2 queries, or no held-out pair of shown documents.
    """
    n_queries = features.shape[0]
    if n_queries < 2:
        raise ValueError("the logged order's fit needs at least 2 queries, got %d" % n_queries)
    features, mask = features.detach().float().cpu(), mask.detach().cpu()
    shown = features[mask]
    x = torch.where(mask[..., None], (features - shown.mean(0)) / shown.std(0).clamp_min(1e-6), 0.0)
    pairs = pair_mask(mask)
    order = torch.randperm(n_queries, generator=generator)
    n_heldout = min(max(1, int(round(heldout_fraction * n_queries))), n_queries - 1)
    heldout, train = order[:n_heldout], order[n_heldout:]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(2**62, (1,), generator=generator)))
        ranker = torch.nn.Sequential(torch.nn.Linear(x.shape[2], hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))
    optimizer = torch.optim.Adam(ranker.parameters(), lr=learning_rate)
    for _ in range(steps):
        batch = train[torch.randint(len(train), (min(batch_queries, len(train)),), generator=generator)]
        scores = ranker(x[batch]).squeeze(-1)
        margins = (scores[:, :, None] - scores[:, None, :])[pairs[batch]]
        if margins.numel() == 0:
            continue
        loss = torch.nn.functional.softplus(-margins).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        scores = ranker(x[heldout]).squeeze(-1)
        margins = (scores[:, :, None] - scores[:, None, :])[pairs[heldout]]
    if margins.numel() == 0:
        raise ValueError("the %d held-out queries have no pair of shown documents" % n_heldout)
    return OrderFit(float((margins > 0).float().mean()), int(n_heldout), int(margins.numel()))
