"""Eq. dr_loss of the paper: MULTR's doubly-robust listwise loss.

Shapes: B queries, N slots of the observed (displayed) list; ``mask`` [B, N]
is True for real documents and padded slots never carry weight or loss.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from ultra_multr.losses.listwise import weighted_listwise_loss


VARIANTS = ("dr", "eib")
#: "mixture": Eq. dr_loss's (1 - a) observed + a re-ranked terms (the paper's at
#: a = S / (S + 1)); "randomized": :func:`randomized_document_weights`.
FORMS = ("mixture", "randomized")
#: "clip": per-document weights clamped at >= 0; "none": the paper's form;
#: "rebalance": :func:`rebalance_weights` (needs pseudo-click probabilities).
WEIGHT_GUARDS = ("clip", "none", "rebalance")


def paper_rerank_weight(sample_num: int) -> float:
    """The re-ranked term's share in Eq. dr_loss: S / (S + 1)."""
    return sample_num / (sample_num + 1.0)


def apply_weight_guard(document_weights: torch.Tensor, guard: str) -> torch.Tensor:
    """The guard on per-document weights [B, N]: "clip" clamps them at >= 0,
    "none" (the paper's form) leaves them as they are."""
    if guard not in WEIGHT_GUARDS:
        raise ValueError("guard must be one of %s, got %r" % (WEIGHT_GUARDS, guard))
    if guard == "rebalance":
        raise ValueError('guard "rebalance" needs the weights with and without a click: use dr_loss_and_weights')
    return document_weights.clamp(min=0.0) if guard == "clip" else document_weights


def dr_document_weights(
    clicks: torch.Tensor,
    observed_pseudo_clicks: torch.Tensor,
    randomized_pseudo_clicks: torch.Tensor,
    weights: torch.Tensor,
    mask: torch.Tensor,
    variant: str = "dr",
    rerank_weight: Optional[float] = None,
    guard: str = "clip",
) -> torch.Tensor:
    """How much each document's Delta counts in Eq. dr_loss.

    Because Delta(d | pi) is the same for every order pi of a query's
    documents, Eq. dr_loss collapses to ``sum_d W_d Delta(d)`` with

        dr:  W_d = (1 - a) [c^o_d + (c_d - c^o_d) w_d] + a mean_s c^s_d
        eib: W_d = (1 - a) c_d + a mean_s c^s_d

    where c is the real click, c^o the pseudo click on the observed list,
    c^s the pseudo click the document received in re-ranking s, w its
    inverse propensity weight on the observed list and a the weight of the
    re-ranked (imputed) term.  a = S / (S + 1) is the paper's Eq. dr_loss,
    ``[c^o_d + sum_s c^s_d + (c_d - c^o_d) w_d] / (S + 1)``; a = 0 is the
    observed list alone.

    Args:
        clicks: [B, N] real clicks on the observed list.
        observed_pseudo_clicks: [B, N] simulator clicks (or click
            probabilities) on the observed list, float.
        randomized_pseudo_clicks: [B, S, N] simulator clicks (or
            probabilities) of each re-ranking, moved back to observed-list
            slots, float; only their mean over S enters (S may be 0 when
            a = 0; a caller holding the mean passes it as [B, 1, N] with an
            explicit ``rerank_weight``).
        weights: [B, N] inverse propensity weights of the observed list.
        mask: [B, N] bool.
        variant: "dr" (MULTR) or "eib" (EIB-MULTR: real clicks on the
            observed list taken as they are, no propensity correction).
        rerank_weight: a in [0, 1]; None: the paper's S / (S + 1).
        guard: "clip" (W_d clamped at >= 0) or "none" (the paper's form,
            W_d < 0 when c^o_d = 1, c_d = 0 and w_d large).

    Returns:
        [B, N] weights, 0 at padded slots; >= 0 unless guard is "none".
    """
    if variant not in VARIANTS:
        raise ValueError("variant must be one of %s, got %r" % (VARIANTS, variant))
    num_samples = randomized_pseudo_clicks.shape[1]
    a = paper_rerank_weight(num_samples) if rerank_weight is None else float(rerank_weight)
    if not 0.0 <= a <= 1.0:
        raise ValueError("rerank_weight must be in [0, 1], got %r" % a)
    if a > 0 and num_samples == 0:
        raise ValueError("rerank_weight %r > 0 needs re-ranked pseudo clicks, got S = 0" % a)
    if variant == "dr":
        observed = observed_pseudo_clicks + (clicks - observed_pseudo_clicks) * weights
    else:
        observed = clicks
    total = (1.0 - a) * observed
    if a > 0:
        total = total + a * randomized_pseudo_clicks.mean(dim=1)
    return apply_weight_guard(torch.where(mask, total, torch.zeros_like(total)), guard)


def randomized_document_weights(
    clicks: torch.Tensor,
    observed_pseudo_clicks: torch.Tensor,
    randomized_pseudo_clicks: torch.Tensor,
    weights: torch.Tensor,
    mask: torch.Tensor,
) -> torch.Tensor:
    """Weights whose expectation is a document's click probability under
    uniformly random orders (the randomisation target T_d), up to a factor
    common to the list, when either the simulator or the propensities are
    exact (position-based examination; studies/estimator_targets/README.md):

        W_d = mean_s c^s_d + (c_d - c^o_d) e_bar / e_k(d)

    with e_k(d) the propensity of d's position on the observed list and
    e_bar the mean propensity over the list's real positions.  From DLA's
    weights w_k = e_1 / e_k it is ``w_k * mean_j (1 / w_j)``: scale-free.

    Args: as :func:`dr_document_weights` (``weights`` > 0 at real slots).

    Returns:
        [B, N] weights, 0 at padded slots (negative where c_d = 0 and
        c^o_d e_bar / e_k(d) > mean_s c^s_d).
    """
    inverse = torch.where(mask, 1.0 / torch.where(mask, weights, torch.ones_like(weights)), torch.zeros_like(weights))
    mean_inverse = inverse.sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1)
    total = randomized_pseudo_clicks.mean(dim=1) + (clicks - observed_pseudo_clicks) * weights * mean_inverse
    return torch.where(mask, total, torch.zeros_like(total))


def rebalance_weights(
    no_click: torch.Tensor, with_click: torch.Tensor, clicks: torch.Tensor, click_probability: torch.Tensor
) -> torch.Tensor:
    """A guard that keeps the weight's expectation under the simulator's click probability.

    Every form is linear in the real click, W = A + B c, with A the weight
    without a click.  Where A < 0 (the loss would be unbounded below), the
    weight becomes ``c (A + B p) / p``: 0 without a click and the weight's
    expectation under the simulator's click probability p divided by p with
    one, so E[W] is unchanged when p is the click's probability (an exact
    simulator), and W >= 0 whenever A + B p >= 0 (true of both forms: it is
    ``(1 - a) p + a m`` for the mixture and m for "randomized").  Where
    A >= 0 the weight is left alone.

    Args:
        no_click, with_click: [B, N] A and A + B.
        clicks: [B, N] real clicks.
        click_probability: [B, N] p, the simulator's click probability on the
            observed list (``imputation=expected``), in [0, 1].

    Returns:
        [B, N] guarded weights.
    """
    expected = no_click + (with_click - no_click) * click_probability
    moved = clicks * expected / click_probability.clamp(min=torch.finfo(expected.dtype).tiny)
    return torch.where(no_click < 0, moved, no_click + (with_click - no_click) * clicks)


def negative_weight_share(document_weights: torch.Tensor, mask: torch.Tensor) -> float:
    """Share of real documents whose weight is < 0 (those "clip" sets to 0).

    Args:
        document_weights: [B, N] from :func:`dr_document_weights` with guard "none".
        mask: [B, N] bool.
    """
    negative = (document_weights < 0) & mask
    return float(negative.sum()) / max(int(mask.sum()), 1)


def dr_loss_and_weights(
    scores: torch.Tensor,
    mask: torch.Tensor,
    clicks: torch.Tensor,
    observed_pseudo_clicks: torch.Tensor,
    randomized_pseudo_clicks: torch.Tensor,
    weights: torch.Tensor,
    variant: str = "dr",
    rerank_weight: Optional[float] = None,
    guard: str = "clip",
    form: str = "mixture",
    normalization: str = "batch_weight",
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Eq. dr_loss (``form="mixture"``) or the randomised-target form
    (``form="randomized"``: :func:`randomized_document_weights`, variant
    "dr" only, ``rerank_weight`` unused), and the unguarded per-document
    weights it was built from.

    Args: as in :func:`dr_loss`.

    Returns:
        (scalar loss as :func:`dr_loss` returns it, [B, N] weights of
        :func:`dr_document_weights` with guard "none", e.g. for
        :func:`negative_weight_share`).
    """
    if form not in FORMS:
        raise ValueError("form must be one of %s, got %r" % (FORMS, form))
    if form == "randomized":
        if variant != "dr":
            raise ValueError("form 'randomized' corrects with propensities: variant must be 'dr', got %r" % variant)
        if randomized_pseudo_clicks.shape[1] == 0:
            raise ValueError("form 'randomized' needs re-ranked pseudo clicks, got S = 0")

    def weights_for(real_clicks: torch.Tensor) -> torch.Tensor:
        if form == "randomized":
            return randomized_document_weights(
                real_clicks, observed_pseudo_clicks, randomized_pseudo_clicks, weights, mask
            )
        return dr_document_weights(
            real_clicks, observed_pseudo_clicks, randomized_pseudo_clicks, weights, mask, variant, rerank_weight, "none"
        )

    unguarded = weights_for(clicks)
    if guard == "rebalance":
        guarded = rebalance_weights(
            weights_for(torch.zeros_like(clicks)), weights_for(torch.ones_like(clicks)), clicks, observed_pseudo_clicks
        )
        guarded = torch.where(mask, guarded, torch.zeros_like(guarded))
    else:
        guarded = apply_weight_guard(unguarded, guard)
    return weighted_listwise_loss(scores, mask, guarded.detach(), normalization), unguarded


def dr_loss(
    scores: torch.Tensor,
    mask: torch.Tensor,
    clicks: torch.Tensor,
    observed_pseudo_clicks: torch.Tensor,
    randomized_pseudo_clicks: torch.Tensor,
    weights: torch.Tensor,
    variant: str = "dr",
    rerank_weight: Optional[float] = None,
    guard: str = "clip",
    form: str = "mixture",
    normalization: str = "batch_weight",
) -> torch.Tensor:
    """Eq. dr_loss of the paper (or ``form``'s weights), reduced over the batch.

    Args:
        scores: [B, N] ranker scores of the observed list (gradients flow here).
        normalization: "batch_weight" (default: ``sum_qd W_qd Delta / sum_qd |W_qd|``,
            DLA's scale) or "none" (``mean_q sum_d W_qd Delta``, the printed
            equation averaged over the batch's queries);
            :func:`~ultra_multr.losses.listwise.weighted_listwise_loss`.
        Others: as in :func:`dr_document_weights` (no gradient is taken
            through them; pass detached tensors).

    Returns:
        scalar.
    """
    return dr_loss_and_weights(
        scores, mask, clicks, observed_pseudo_clicks, randomized_pseudo_clicks, weights, variant, rerank_weight, guard,
        form, normalization,
    )[0]
