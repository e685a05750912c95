"""How well the learner's features predict the logged order, against orders known to come from them.

A click model fitted to a log whose logging ranker ordered the documents by
relevance that no feature carries (a production ranker that knows more than
the learner) absorbs that relevance into position: MULTR's user simulator
then imputes clicks from it on re-ranked lists (the **stress** group of our
studies).  In ULTRA's recipe (the paper's setting) the logger is a Rank SVM on
the features the learner sees, so the logged order is a function of them.

:func:`logged_order_fit` tells the two apart from the log alone, without a
label.  A small ranker (one hidden layer) is fitted to the logged order of most
training queries with a pairwise logistic loss, and on the other queries it
counts the share of document pairs it orders as the logger did: the
**agreement**.  How high that share can be depends on the data (how many
queries, how many features, how heavy-tailed and correlated they are, how many
documents they hardly tell apart: 0.99 on Gaussian generated features, 0.9 on
MQ2008 where the Rank SVM's order is a function of the features), so the same
fit is made, on the same features and queries, to **null orders**: orders that
come from the features by construction, made by the kind of rankers a
features-only logger is, fitted without a label to the logged order of a small
sample of queries (:data:`NULL_SAMPLE_SHARE`, at least :data:`NULL_MIN_SAMPLE`,
as ULTRA's recipe fits its Rank SVM):

* :data:`NULL_LINEAR` linear Rank SVMs (squared hinge, C = :data:`NULL_SVM_C`
  on SVMrank's scale, on the features as the data hold them);
* :data:`NULL_SHALLOW` shallow rankers (one hidden layer of
  :data:`NULL_SHALLOW_HIDDEN` units).

Their mean agreement is the **null agreement**: what the fit reaches when
the order is a function of these features.  A logged order clearly harder to
reproduce than that (the caller's margin, :mod:`ultra_multr.components.guards`)
carries something the features lack.

Ties are ties: a pair of documents with identical features (which no ranker of
the features can order) is neither a hit nor a miss, nor is a pair a null
ranker scores equally; a pair the fitted ranker scores equally counts half.
The lists' features are standardised for the fitted rankers.  Everything random
comes from the caller's generator; the global generators are left alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Tuple

import torch

#: The null rankers: linear Rank SVMs and shallow rankers, each fitted to the logged order of its own sample.
NULL_LINEAR, NULL_SHALLOW = 3, 2
#: Each null ranker's sample: this share of the training queries, at least NULL_MIN_SAMPLE (ULTRA's recipe's 1 %, 20).
NULL_SAMPLE_SHARE, NULL_MIN_SAMPLE = 0.01, 20
#: The linear null's C on SVMrank's scale (ULTRA's recipe's ``svm_rank_learn -c 200``).
NULL_SVM_C = 200.0
#: The shallow null's hidden units and Adam steps.
NULL_SHALLOW_HIDDEN, NULL_SHALLOW_STEPS = 8, 200


@dataclass(frozen=True)
class OrderFit:
    """The fitted ranker's agreement with the logged order and with the null orders, on held-out queries.

    Attributes:
        agreement: share of the held-out pairs of shown documents it orders as the logger did (0.5: chance).
        null_agreements: the same share for each null order (:data:`NULL_LINEAR` linear, then the shallow ones;
            nan for one without a held-out pair).
        heldout_queries: queries held out.
        heldout_pairs: their pairs of shown documents with different features (the pairs the agreement counts).
    """

    agreement: float
    null_agreements: Tuple[float, ...]
    heldout_queries: int
    heldout_pairs: int

    @property
    def null_agreement(self) -> float:
        """The mean of :attr:`null_agreements`: what the fit reaches on an order of these features."""
        return sum(self.null_agreements) / len(self.null_agreements)


def pair_mask(mask: torch.Tensor) -> torch.Tensor:
    """[Q, N, N] bool: (i, j) with i logged above j (i < j), both shown, of mask [Q, N] bool."""
    slots = mask.shape[1]
    upper = torch.ones(slots, slots, dtype=torch.bool, device=mask.device).triu(1)
    return mask[:, :, None] & mask[:, None, :] & upper


def distinguishable_pairs(features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[Q, N, N] bool: the :func:`pair_mask` pairs whose documents' features [Q, N, F] differ."""
    n_queries, slots, width = features.shape
    _, row_ids = torch.unique(features.reshape(n_queries * slots, width), dim=0, return_inverse=True)
    row_ids = row_ids.reshape(n_queries, slots)
    return pair_mask(mask) & (row_ids[:, :, None] != row_ids[:, None, :])


def ordered_pairs(scores: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """[R, Q, N, N] bool: (i, j) of ``pairs`` [Q, N, N] (either way round) with ``scores`` [R, Q, N] of i above j's."""
    either = pairs | pairs.transpose(1, 2)
    return (scores[:, :, :, None] > scores[:, :, None, :]) & either


def agreements(scores: torch.Tensor, better: torch.Tensor) -> torch.Tensor:
    """[R] float: share of the pairs ``better`` [R, B, N, N] (i above j) that ``scores`` [R, B, N] order so, a tie
    counting half (nan for a row without a pair)."""
    differences = scores[:, :, :, None] - scores[:, :, None, :]
    hits = ((differences > 0) & better).sum((1, 2, 3)) + 0.5 * ((differences == 0) & better).sum((1, 2, 3))
    return hits / better.sum((1, 2, 3))


def train_rankers(x: torch.Tensor, better: torch.Tensor, queries: torch.Tensor, generator: torch.Generator,
                  hidden: int, steps: int, batch_queries: int = 256, learning_rate: float = 0.01,
                  ) -> Callable[[torch.Tensor], torch.Tensor]:
    """Fit R rankers of one hidden layer at once, ranker r to the pairs ``better[r]``, on ``queries``.

    Args:
        x: [Q, N, F] float32 standardised features.
        better: [R, Q, N, N] bool, (i, j) where ranker r must score i above j.
        queries: [T] int64 the queries they are fitted on (batches of ``batch_queries`` drawn with replacement).

    Returns:
        The fitted rankers' scores: [B, N, F] features -> [R, B, N].
    """
    rankers, width = better.shape[0], x.shape[2]

    def uniform(shape: Tuple[int, ...], fan_in: int) -> torch.Tensor:  # torch.nn.Linear's initialisation
        return ((torch.rand(shape, generator=generator) * 2 - 1) / fan_in ** 0.5).requires_grad_()

    first, bias, second = uniform((rankers, width, hidden), width), uniform((rankers, 1, 1, hidden), width), \
        uniform((rankers, hidden), hidden)

    def scores(features: torch.Tensor) -> torch.Tensor:
        hidden_units = torch.relu(torch.einsum("bnf,rfh->rbnh", features, first) + bias)
        return torch.einsum("rbnh,rh->rbn", hidden_units, second)

    optimizer = torch.optim.Adam([first, bias, second], lr=learning_rate)
    for _ in range(steps):
        batch = queries[torch.randint(len(queries), (min(batch_queries, len(queries)),), generator=generator)]
        batch_scores = scores(x[batch])
        wanted = better[:, batch]
        losses = torch.nn.functional.softplus(batch_scores[:, :, None, :] - batch_scores[:, :, :, None]) * wanted
        loss = (losses.sum((1, 2, 3)) / wanted.sum((1, 2, 3)).clamp_min(1)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return lambda features: scores(features).detach()


def rank_svm(features: torch.Tensor, better: torch.Tensor, c: float = NULL_SVM_C, max_steps: int = 50) -> torch.Tensor:
    """[F] float64 weights of a linear Rank SVM (squared hinge, no bias) fitted to the pairs ``better`` [S, N, N]
    of the lists ``features`` [S, N, F]; ``c`` on SVMrank's scale (LinearSVC's C = c / S).

    Newton's method on the primal ``|w|^2 / 2 + C * sum_p max(0, 1 - w . d_p)^2`` (d_p: the pair's feature
    difference): each step solves the quadratic of the pairs inside the margin, until that set stops changing
    (or ``max_steps``).
    """
    lists, above, below = torch.nonzero(better, as_tuple=True)
    differences = (features[lists, above] - features[lists, below]).double()
    scale = 2.0 * c / features.shape[0]
    identity = torch.eye(features.shape[2], dtype=torch.float64)
    weights = torch.zeros(features.shape[2], dtype=torch.float64)
    inside = torch.ones(len(differences), dtype=torch.bool)
    for _ in range(max_steps):
        margin = differences[inside]
        weights = torch.linalg.solve(identity + scale * margin.T @ margin, scale * margin.sum(0))
        now_inside = differences @ weights < 1
        if torch.equal(now_inside, inside):
            break
        inside = now_inside
    return weights


def null_scores(features: torch.Tensor, x: torch.Tensor, logged: torch.Tensor, queries: torch.Tensor,
                generator: torch.Generator) -> torch.Tensor:
    """[NULL_LINEAR + NULL_SHALLOW, Q, N] float32 the null rankers' scores of every list.

    Args:
        features: [Q, N, F] the lists' features as the data hold them (the linear nulls').
        x: [Q, N, F] the same, standardised (the shallow nulls').
        logged: [Q, N, N] bool the logged order's pairs (i above j).
        queries: [T] int64 the queries each null ranker draws its sample from.
    """
    size = min(len(queries), max(NULL_MIN_SAMPLE, int(NULL_SAMPLE_SHARE * len(queries))))
    samples = [queries[torch.randperm(len(queries), generator=generator)[:size]]
               for _ in range(NULL_LINEAR + NULL_SHALLOW)]
    nulls = [(features.double() @ rank_svm(features[sample], logged[sample])).float() for sample in samples[:NULL_LINEAR]]
    nulls += [train_rankers(x, logged[None], sample, generator, NULL_SHALLOW_HIDDEN, NULL_SHALLOW_STEPS)(x)[0]
              for sample in samples[NULL_LINEAR:]]
    return torch.stack(nulls)


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
    """Fit a ranker to the logged order of some queries, and one to each null order; measure their agreements on
    the other queries.

    Args:
        features: [Q, N, F] float32, each list in its logged order (slot 0 on top); any values at padded slots.
        mask: [Q, N] bool, True where a document was shown.
        generator: CPU generator for the held-out split, the null rankers' samples and fits, the initial weights
            and the batches.
        heldout_fraction: share of the queries held out (at least one query each way).

    Returns:
        The agreements on the held-out queries' pairs.

    Raises:
        ValueError: fewer than 2 queries, or no held-out pair of shown documents with different features.
    """
    n_queries = features.shape[0]
    if n_queries < 2:
        raise ValueError("the logged order's fit needs at least 2 queries, got %d" % n_queries)
    mask = mask.detach().cpu()
    features = torch.where(mask[..., None], features.detach().float().cpu(), 0.0)
    shown = features[mask]
    x = torch.where(mask[..., None], (features - shown.mean(0)) / shown.std(0).clamp_min(1e-6), 0.0)
    pairs = distinguishable_pairs(features, mask)
    order = torch.randperm(n_queries, generator=generator)
    n_heldout = min(max(1, int(round(heldout_fraction * n_queries))), n_queries - 1)
    heldout, train = order[:n_heldout], order[n_heldout:]
    targets = torch.cat([-torch.arange(mask.shape[1], dtype=torch.float32).expand(mask.shape)[None],
                         null_scores(features, x, pairs, train, generator)])
    better = ordered_pairs(targets, pairs)
    heldout_pairs = int(better[0, heldout].sum())
    if heldout_pairs == 0:
        raise ValueError("the %d held-out queries have no pair of shown documents with different features" % n_heldout)
    scores = train_rankers(x, better, train, generator, hidden, steps, batch_queries, learning_rate)(x[heldout])
    shares = agreements(scores, better[:, heldout]).tolist()
    return OrderFit(shares[0], tuple(shares[1:]), int(n_heldout), heldout_pairs)
