"""Ranking losses as pure functions of tensors, one method per module.

Shapes: B queries, N slots of the observed (displayed) list, S randomised
re-rankings per query.  ``mask`` [B, N] is True for real documents; padded
slots never carry clicks, pseudo clicks, weight or loss.

Modules: :mod:`.listwise` (the softmax pieces they share), :mod:`.dla`,
:mod:`.ipw`, :mod:`.dr` (MULTR's loss object and its forms), :mod:`.authors_code` (MULTR as the authors' code
combines it), :mod:`.rem`, :mod:`.paird`, :mod:`.pal`.
Every public name is re-exported here, so ``losses.dr_loss`` works.
"""
from ultra_multr.losses.authors_code import authors_code_dr_loss
from ultra_multr.losses.dla import (
    PROBABILITY_FUNCTIONS,
    dla_softmax_loss,
    ipw_weights,
    logits_to_probability,
    relative_ipw_weights,
)
from ultra_multr.losses.dr import (
    AUTO,
    FORM_RULES,
    DocumentWeightsOf,
    DoublyRobustLoss,
    DRForm,
    Reduction,
    RerankShare,
    RerankWeight,
    Variant,
    WeightGuard,
    dr_document_weights,
    negative_weight_share,
    paper_rerank_weight,
    randomized_document_weights,
    rebalance_weights,
)
from ultra_multr.losses.ipw import ipw_loss
from ultra_multr.losses.listwise import (
    MIN_WEIGHT_MASS,
    NORMALIZATIONS,
    listwise_document_losses,
    masked_log_softmax,
    masked_mean,
    weighted_listwise_loss,
)
from ultra_multr.losses.paird import pairwise_debias_loss, pairwise_debias_pair_losses, pairwise_debias_update
from ultra_multr.losses.pal import log1mexp, pal_click_log_probability, pal_click_loss
from ultra_multr.losses.rem import online_em_update, rem_posteriors, sigmoid_cross_entropy

__all__ = [
    "AUTO",
    "DRForm",
    "DocumentWeightsOf",
    "DoublyRobustLoss",
    "FORM_RULES",
    "MIN_WEIGHT_MASS",
    "NORMALIZATIONS",
    "PROBABILITY_FUNCTIONS",
    "Reduction",
    "RerankShare",
    "RerankWeight",
    "Variant",
    "WeightGuard",
    "authors_code_dr_loss",
    "dla_softmax_loss",
    "dr_document_weights",
    "ipw_loss",
    "ipw_weights",
    "listwise_document_losses",
    "log1mexp",
    "logits_to_probability",
    "masked_log_softmax",
    "masked_mean",
    "negative_weight_share",
    "online_em_update",
    "pairwise_debias_loss",
    "pairwise_debias_pair_losses",
    "pairwise_debias_update",
    "pal_click_log_probability",
    "pal_click_loss",
    "paper_rerank_weight",
    "randomized_document_weights",
    "rebalance_weights",
    "relative_ipw_weights",
    "rem_posteriors",
    "sigmoid_cross_entropy",
    "weighted_listwise_loss",
]
