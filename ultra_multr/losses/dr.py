"""Eq. dr_loss of the paper, MULTR's doubly-robust listwise loss, as one configured object.

:class:`DoublyRobustLoss` holds the estimator's settings, each a typed value:
its form (:class:`DRForm`), the variant (:class:`Variant`), the weight guard
(:class:`WeightGuard`), the batch reduction (:class:`Reduction`) and a, the
re-ranked term's share of the mixture.  :meth:`DoublyRobustLoss.weights` is
the one entry point to the per-document weights (the loss, MULTR's
estimator-target check and the closed forms all call it), and calling the
object gives the loss.

The forms (:data:`FORM_RULES`, one entry each: what it computes, which
variants and guards it takes, whether it mixes by a and needs re-ranked
lists; the formulas: docs/estimator.md).  Adding a form is an enum member and
its entry here:

* ``mixture`` (Eq. dr_loss, :func:`dr_document_weights`), a = S / (S + 1) as printed;
* ``randomized`` (:func:`randomized_document_weights`);
* ``authors_code``: the combination of the authors' released code, four softmax losses each
  normalised by its own mass (:mod:`.authors_code`): a loss, not per-document weights.

The knob ``rerank_weight`` of a settings file names a form or the mixture's a
(:class:`RerankWeight`: "paper", a number in [0, 1], "auto", or a form's name).

Shapes: B queries, N slots of the observed (displayed) list, S re-rankings; ``mask`` [B, N] is True for real
documents and padded slots never carry weight or loss.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

import torch

from ultra_multr.config import Choice, require
from ultra_multr.losses.authors_code import authors_code_dr_loss
from ultra_multr.losses.listwise import weighted_listwise_loss


class Variant(Choice):
    """MULTR (``dr``: real clicks corrected by the propensities) or EIB-MULTR (``eib``: real clicks as they are)."""

    DR = "dr"
    EIB = "eib"


class WeightGuard(Choice):
    """What keeps a document's weight from being negative: ``none`` (the paper's form, the loss is unbounded
    below), ``clip`` (clamped at 0; biased where it acts) or ``rebalance`` (:func:`rebalance_weights`: its
    expectation under the simulator's click probability kept; needs that probability)."""

    NONE = "none"
    CLIP = "clip"
    REBALANCE = "rebalance"


class Reduction(Choice):
    """How the loss is reduced over the batch (:func:`~ultra_multr.losses.listwise.weighted_listwise_loss`):
    ``batch_weight`` (divided by the batch's total weight, DLA's scale) or ``none`` (the printed equation
    averaged over the batch's queries)."""

    BATCH_WEIGHT = "batch_weight"
    NONE = "none"


class DRForm(Choice):
    """The estimator: Eq. dr_loss's ``mixture``, the ``randomized`` target's weights, or the ``authors_code``'s
    combination (see the module docstring)."""

    MIXTURE = "mixture"
    RANDOMIZED = "randomized"
    AUTHORS_CODE = "authors_code"


def paper_rerank_weight(sample_num: int) -> float:
    """The re-ranked term's share in Eq. dr_loss: S / (S + 1)."""
    return sample_num / (sample_num + 1.0)


def dr_document_weights(
    clicks: torch.Tensor,
    observed_pseudo_clicks: torch.Tensor,
    randomized_pseudo_clicks: torch.Tensor,
    weights: torch.Tensor,
    mask: torch.Tensor,
    variant: Variant = Variant.DR,
    rerank_weight: Optional[float] = None,
) -> torch.Tensor:
    """How much each document's Delta counts in Eq. dr_loss (the mixture), unguarded: W_d of the formula in
    docs/estimator.md, with a the re-ranked term's share (a = S / (S + 1) is the equation as printed, a = 0 the
    observed list alone) and, for EIB-MULTR, the real click in place of the corrected observed term.

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
        variant: MULTR's or EIB-MULTR's observed term.
        rerank_weight: a in [0, 1]; None: the paper's S / (S + 1).

    Returns:
        [B, N] weights, 0 at padded slots (negative where c^o_d = 1, c_d = 0 and w_d is large).
    """
    variant = Variant.parse(str(variant))
    num_samples = randomized_pseudo_clicks.shape[1]
    a = paper_rerank_weight(num_samples) if rerank_weight is None else float(rerank_weight)
    if not 0.0 <= a <= 1.0:
        raise ValueError("rerank_weight must be in [0, 1], got %r" % a)
    if a > 0 and num_samples == 0:
        raise ValueError("rerank_weight %r > 0 needs re-ranked pseudo clicks, got S = 0" % a)
    if variant == Variant.DR:
        observed = observed_pseudo_clicks + (clicks - observed_pseudo_clicks) * weights
    else:
        observed = clicks
    total = (1.0 - a) * observed
    if a > 0:
        total = total + a * randomized_pseudo_clicks.mean(dim=1)
    return torch.where(mask, total, torch.zeros_like(total))


def randomized_document_weights(
    clicks: torch.Tensor,
    observed_pseudo_clicks: torch.Tensor,
    randomized_pseudo_clicks: torch.Tensor,
    weights: torch.Tensor,
    mask: torch.Tensor,
    variant: Variant = Variant.DR,
    rerank_weight: Optional[float] = None,
) -> torch.Tensor:
    """Weights whose expectation is a document's click probability under
    uniformly random orders (the randomisation target T_d), up to a factor
    common to the list, when either the simulator or the propensities are
    exact (position-based examination; studies/estimator_targets/README.md):

        W_d = mean_s c^s_d + (c_d - c^o_d) e_bar / e_k(d)

    with e_k(d) the propensity of d's position on the observed list and
    e_bar the mean propensity over the list's real positions.  From DLA's
    weights w_k = e_1 / e_k it is ``w_k * mean_j (1 / w_j)``: scale-free.

    Args: as :func:`dr_document_weights` (``weights`` > 0 at real slots; ``variant`` is always dr and
        ``rerank_weight`` is not read: :data:`FORM_RULES` refuses other values).

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
        document_weights: [B, N] unguarded weights (:meth:`DoublyRobustLoss.weights`).
        mask: [B, N] bool.
    """
    negative = (document_weights < 0) & mask
    return float(negative.sum()) / max(int(mask.sum()), 1)


#: (clicks, observed, randomized, ipw weights, mask, variant, a) -> [B, N] unguarded weights, all as in
#: :func:`dr_document_weights`.
DocumentWeights = Callable[..., torch.Tensor]
#: (scores, mask, clicks, observed, randomized, ipw weights) -> scalar, for a form that is not per-document weights.
FormLoss = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class FormRules:
    """What a form computes and what it takes.

    Attributes:
        document_weights: its per-document weights (None: a loss of its own, ``loss``).
        loss: the loss of a form without per-document weights (None otherwise).
        mixes: it reads a (the re-ranked term's share).
        needs_reranked: it needs re-ranked lists (S > 0).
        variants: the variants it has.
        guards: the weight guards it takes.
        about: one line for messages and docs.
    """

    document_weights: Optional[DocumentWeights]
    loss: Optional[FormLoss]
    mixes: bool
    needs_reranked: bool
    variants: Tuple[Variant, ...]
    guards: Tuple[WeightGuard, ...]
    about: str


#: Every form's rules (see the module docstring).
FORM_RULES: Dict[DRForm, FormRules] = {
    DRForm.MIXTURE: FormRules(dr_document_weights, None, mixes=True, needs_reranked=False,
                              variants=tuple(Variant), guards=tuple(WeightGuard),
                              about="Eq. dr_loss: (1 - a) times the observed list's term plus a times the re-ranked"),
    DRForm.RANDOMIZED: FormRules(randomized_document_weights, None, mixes=False, needs_reranked=True,
                                 variants=(Variant.DR,), guards=tuple(WeightGuard),
                                 about="the randomised target's weights, corrected with the propensities"),
    DRForm.AUTHORS_CODE: FormRules(None, authors_code_dr_loss, mixes=False, needs_reranked=False,
                                   variants=(Variant.DR,), guards=(WeightGuard.NONE,),
                                   about="the authors' released code's four softmax losses, no weight guard"),
}


@dataclass(frozen=True)
class DocumentWeightsOf:
    """A batch's per-document weights: ``guarded`` [B, N] (what the listwise loss takes) and ``unguarded``
    [B, N] (the form's own, e.g. for :func:`negative_weight_share`)."""

    guarded: torch.Tensor
    unguarded: torch.Tensor


@dataclass(frozen=True)
class DoublyRobustLoss:
    """MULTR's ranking loss, configured once (see the module docstring).

    Attributes:
        form: the estimator.
        variant: MULTR's or EIB-MULTR's observed term (forms that have both).
        guard: the weight guard.
        reduction: the batch reduction of the per-document forms.
        rerank_weight: a, the re-ranked term's share (mixing forms); None: the paper's S / (S + 1).

    Raises:
        ValueError: a combination the form does not have (naming it).
    """

    form: DRForm = DRForm.MIXTURE
    variant: Variant = Variant.DR
    guard: WeightGuard = WeightGuard.REBALANCE
    reduction: Reduction = Reduction.BATCH_WEIGHT
    rerank_weight: Optional[float] = None

    def __post_init__(self) -> None:
        for name, kind in (("form", DRForm), ("variant", Variant), ("guard", WeightGuard), ("reduction", Reduction)):
            object.__setattr__(self, name, kind.parse(str(getattr(self, name))))
        rules = self.rules
        require(self.variant in rules.variants, "the %s form (%s) has variant %s only, got variant=%s" % (
            self.form, rules.about, "/".join(rules.variants), self.variant))
        require(self.guard in rules.guards, "the %s form (%s) takes dr_weight_guard %s only, got %s" % (
            self.form, rules.about, "/".join(rules.guards), self.guard))
        require(self.rerank_weight is None or 0.0 <= self.rerank_weight <= 1.0,
                "rerank_weight must be in [0, 1], got %r" % self.rerank_weight)

    @property
    def rules(self) -> FormRules:
        return FORM_RULES[self.form]

    def describe(self) -> str:
        """In words, e.g. ``the mixture form (a = 0.8889), variant dr, rebalance weight guard``."""
        share = " (a = %.4f)" % self.rerank_weight if self.rules.mixes and self.rerank_weight is not None else ""
        return "the %s form%s, variant %s, %s weight guard" % (self.form, share, self.variant, self.guard)

    def weights(self, clicks: torch.Tensor, observed: torch.Tensor, randomized: torch.Tensor, ipw: torch.Tensor,
                mask: torch.Tensor) -> DocumentWeightsOf:
        """The per-document weights of a batch, guarded and unguarded.

        Args:
            clicks: [B, N] real clicks.
            observed: [B, N] pseudo clicks on the observed list (for the rebalance guard: the simulator's click
                probabilities, ``imputation=expected``).
            randomized: [B, S, N] pseudo clicks on S re-rankings, in observed-list slots.
            ipw: [B, N] inverse propensity weights of the observed list.
            mask: [B, N] bool.

        Raises:
            ValueError: the form has no per-document weights (``authors_code``), or it needs re-ranked lists and
                S = 0.
        """
        compute = self.rules.document_weights
        if compute is None:
            raise ValueError("the %s form is a loss of its own (%s): it has no per-document weights"
                             % (self.form, self.rules.about))
        if self.rules.needs_reranked and randomized.shape[1] == 0:
            raise ValueError("the %s form needs re-ranked pseudo clicks, got S = 0" % self.form)

        def unguarded_for(real_clicks: torch.Tensor) -> torch.Tensor:
            return compute(real_clicks, observed, randomized, ipw, mask, self.variant, self.rerank_weight)

        unguarded = unguarded_for(clicks)
        if self.guard == WeightGuard.REBALANCE:
            guarded = rebalance_weights(unguarded_for(torch.zeros_like(clicks)), unguarded_for(torch.ones_like(clicks)),
                                        clicks, observed)
            guarded = torch.where(mask, guarded, torch.zeros_like(guarded))
        elif self.guard == WeightGuard.CLIP:
            guarded = unguarded.clamp(min=0.0)
        else:
            guarded = unguarded
        return DocumentWeightsOf(guarded=guarded, unguarded=unguarded)

    def __call__(self, scores: torch.Tensor, mask: torch.Tensor, clicks: torch.Tensor, observed: torch.Tensor,
                 randomized: torch.Tensor, ipw: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, float]]:
        """The loss of a batch and its named parts (``negative_weight_share`` of the per-document forms).

        Args:
            scores: [B, N] ranker scores of the observed list (gradients flow here, never into the others).
            Others: as :meth:`weights`.

        Returns:
            (scalar, parts).
        """
        if self.rules.loss is not None:
            return self.rules.loss(scores, mask, clicks, observed, randomized, ipw), {}
        weights = self.weights(clicks, observed, randomized, ipw, mask)
        loss = weighted_listwise_loss(scores, mask, weights.guarded.detach(), self.reduction)
        return loss, {"negative_weight_share": negative_weight_share(weights.unguarded, mask)}


@dataclass(frozen=True)
class RerankShare:
    """a of the mixture as a knob's value: ``paper`` (S / (S + 1)) or a number in [0, 1]; prints as written."""

    text: str
    value: Optional[float]

    @classmethod
    def parse(cls, text: str) -> "RerankShare":
        text = str(text)
        if text == "paper":
            return cls(text, None)
        try:
            value = float(text)
        except ValueError:
            raise ValueError("expected \"paper\" or a number in [0, 1], got %r" % text) from None
        require(0.0 <= value <= 1.0, "expected \"paper\" or a number in [0, 1], got %r" % text)
        return cls(text, value)

    def resolve(self, sample_num: int) -> float:
        """a for ``sample_num`` re-rankings."""
        return paper_rerank_weight(sample_num) if self.value is None else self.value

    def __str__(self) -> str:
        return self.text


#: rerank_weight's value for "choose a on the validation split".
AUTO = "auto"


@dataclass(frozen=True)
class RerankWeight:
    """The knob ``rerank_weight``: the estimator's form and, for the mixture, its a; prints as written.

    ``paper`` or a number: the mixture at that a (:class:`RerankShare`); ``auto``: the mixture, a chosen by a
    validation pilot; a form's name (``randomized``, ``authors_code``): that form.
    """

    text: str
    form: DRForm
    share: Optional[RerankShare]

    @classmethod
    def parse(cls, text: str) -> "RerankWeight":
        text = str(text)
        forms = [form for form in DRForm if form != DRForm.MIXTURE]
        if text == AUTO:
            return cls(text, DRForm.MIXTURE, None)
        for form in forms:
            if text == form.value:
                return cls(text, form, None)
        try:
            return cls(text, DRForm.MIXTURE, RerankShare.parse(text))
        except ValueError:
            raise ValueError("expected %s, \"%s\", \"paper\" or a number in [0, 1], got %r"
                             % (", ".join('"%s"' % f for f in forms), AUTO, text)) from None

    @property
    def auto(self) -> bool:
        return self.form == DRForm.MIXTURE and self.share is None

    def __str__(self) -> str:
        return self.text
