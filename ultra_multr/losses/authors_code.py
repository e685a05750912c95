"""MULTR's ranking loss as the authors' released code combines it (rowedenny/MULTR, ``MULTR.train``).

The paper's Eq. dr_loss mixes per-document weights before one listwise loss
(:mod:`.dr`).  The released code instead adds four ULTRA ``softmax_loss``
terms, each normalised by its own label mass:

    error deviation   L(c, w) - L(c^o, w)      real minus pseudo clicks, inverse-propensity weighted
    observed, direct  L(c^o, 1)                pseudo clicks on the observed list
    re-ranked, direct L(c^s, 1)                pseudo clicks on S re-rankings, one loss over the B x S lists

    loss = [L(c, w) - L(c^o, w) + L(c^o, 1) + S L(c^s, 1)] / (S + 2)

with ``L(y, w)`` ULTRA's ``softmax_loss`` (:func:`.dla.dla_softmax_loss`:
``sum_qd (y + 1e-7) w Delta / sum_qd (y + 1e-7) w``).  How it differs from
the printed equation: each term has its own divisor (the real clicks' IPS
mass, the pseudo clicks' IPS mass, the pseudo clicks' mass, the re-ranked
pseudo clicks' mass), so the error deviation is a difference of two weighted
means rather than a weighted sum that vanishes with c = c^o; the observed
list's pseudo clicks count twice (once weighted, once direct) and the
re-ranked term weighs S / (S + 2), not S / (S + 1); and there is no weight
guard (the deviation is bounded by the spread of Delta, not below by 0).

Delta does not depend on the order of a list, so the S re-ranked lists of a
query enter through their pseudo clicks only: one loss over the B x S lists
equals :func:`.dla.dla_softmax_loss` with the labels ``mean_s c^s`` (the
``1e-7`` smoothing is S times larger on both sides of the fraction).  The
authors permute every slot of the list, padding included, with one
permutation per re-ranking shared by the batch; here padded slots stay out
(the ``mask``), as in every loss of this package.

Shapes: B queries, N slots of the observed (displayed) list, S re-rankings;
``mask`` [B, N] is True for real documents.
"""
from __future__ import annotations

import torch

from ultra_multr.losses.dla import dla_softmax_loss


def authors_code_dr_loss(
    scores: torch.Tensor,
    mask: torch.Tensor,
    clicks: torch.Tensor,
    observed_pseudo_clicks: torch.Tensor,
    randomized_pseudo_clicks: torch.Tensor,
    weights: torch.Tensor,
) -> torch.Tensor:
    """The released code's combination of MULTR's ranking loss.

    Args:
        scores: [B, N] ranker scores of the observed list (gradients flow here).
        mask: [B, N] bool.
        clicks: [B, N] real clicks.
        observed_pseudo_clicks: [B, N] simulator clicks (or their
            expectations) on the observed list.
        randomized_pseudo_clicks: [B, S, N] simulator clicks (or their
            expectations) of each re-ranking, in observed-list slots; S may
            be 0 (the re-ranked term drops out).
        weights: [B, N] DLA's inverse propensity weights of the observed list.

    Returns:
        scalar.
    """
    clicks, observed, weights = clicks.detach(), observed_pseudo_clicks.detach(), weights.detach()
    ones = torch.ones_like(weights)
    num_samples = randomized_pseudo_clicks.shape[1]
    total = (
        dla_softmax_loss(scores, clicks, weights, mask)
        - dla_softmax_loss(scores, observed, weights, mask)
        + dla_softmax_loss(scores, observed, ones, mask)
    )
    if num_samples:
        total = total + num_samples * dla_softmax_loss(
            scores, randomized_pseudo_clicks.detach().mean(dim=1), ones, mask
        )
    return total / (num_samples + 2.0)
