"""Click prediction metrics as the Baidu-ULTR benchmark reports them, from log click probabilities.

Written from the definitions (read, for facts only, in philipphager/ultr-reproducibility at 78d8060 and
philipphager/clax):

* **click NLL**, ultr-reproducibility's ``nll`` (``src/metrics.py``: ``rax.pointwise_sigmoid_loss`` with
  ``reduce_fn=reduce_per_query``, then ``aggregate_metrics``' mean over the rows): per session, the mean over
  its shown documents of the binary cross-entropy ``-(c ln p + (1 - c) ln(1 - p))``; then the mean over
  sessions.  A session that shows no document counts 0 (their ``reduce_per_query`` turns its NaN into 0).
* **perplexity per rank**, CLAX's ``Perplexity`` (``clax/metrics.py``): ``2 ** -(mean over the sessions showing
  rank r of log2 P(c_r as observed))``; the reported perplexity is the mean over ranks.  CLAX averages over
  its fixed number of ranks, counting a rank no session shows as 1; here the mean is over the ranks shown at
  least once (the same wherever every rank is shown).  Given probabilities conditional on the session's
  earlier clicks (a user simulator's), it is CLAX's ``ConditionalPerplexity``.

Inputs are ``ln P(c = 1)``: ``ln P(c = 0)`` is ``log1mexp`` of it, so nothing is clipped (a model sure of a
click that did not come costs what the definition says, up to infinity).

Shapes: S sessions, N ranks; ``mask`` [S, N] True where a document is shown.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List

import torch

from ultra_multr.losses.pal import log1mexp

LOG2 = math.log(2.0)


def document_log_likelihood(log_click: torch.Tensor, clicks: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[S, N] ``c ln p + (1 - c) ln(1 - p)`` of each shown document (nats), 0 where nothing is shown.

    Args:
        log_click: [S, N] ln P(c = 1) (<= 0).
        clicks: [S, N] observed clicks, 0/1.
        mask: [S, N] bool.
    """
    log_click = log_click.double()
    safe = torch.where(mask, log_click, torch.full_like(log_click, -1.0))  # no log1mexp(0) where nothing is shown
    value = torch.where(clicks.to(log_click.device) > 0, safe, log1mexp(safe))
    return torch.where(mask, value, torch.zeros_like(value))


def session_click_nll(log_click: torch.Tensor, clicks: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[S] each session's mean binary cross-entropy over its shown documents (0 for a session showing none)."""
    log_likelihood = document_log_likelihood(log_click, clicks, mask)
    shown = mask.sum(dim=1)
    return torch.where(shown > 0, -log_likelihood.sum(dim=1) / shown.clamp(min=1), torch.zeros_like(shown).double())


@dataclass
class ClickMetrics:
    """Running sums of the click metrics over batches of sessions (e.g. one file at a time).

    Attributes:
        nll_sum: sum over the sessions of :func:`session_click_nll`.
        log_likelihood_sum: sum over the sessions of their summed log-likelihood (nats; the session
            log-likelihood of docs/click_logs.md, ours, kept beside the benchmark's).
        sessions: sessions added.
        log2_per_rank: [N] sum over the sessions of log2 P(c_r as observed) at rank r.
        shown_per_rank: [N] sessions showing rank r.
    """

    n_ranks: int
    nll_sum: float = 0.0
    log_likelihood_sum: float = 0.0
    sessions: int = 0
    log2_per_rank: torch.Tensor = field(init=False)
    shown_per_rank: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        self.log2_per_rank = torch.zeros(self.n_ranks, dtype=torch.float64)
        self.shown_per_rank = torch.zeros(self.n_ranks, dtype=torch.int64)

    def add(self, log_click: torch.Tensor, clicks: torch.Tensor, mask: torch.Tensor) -> None:
        """Add the sessions of one batch (shapes as in the module docstring, N = ``n_ranks``)."""
        if log_click.shape != (log_click.shape[0], self.n_ranks) or clicks.shape != log_click.shape \
                or mask.shape != log_click.shape:
            raise ValueError("click metrics of %d ranks: got log_click %s, clicks %s, mask %s"
                             % (self.n_ranks, tuple(log_click.shape), tuple(clicks.shape), tuple(mask.shape)))
        log_likelihood = document_log_likelihood(log_click, clicks, mask)
        self.nll_sum += float(session_click_nll(log_click, clicks, mask).sum())
        self.log_likelihood_sum += float(log_likelihood.sum())
        self.sessions += int(log_click.shape[0])
        self.log2_per_rank += (log_likelihood / LOG2).sum(dim=0).cpu()
        self.shown_per_rank += mask.sum(dim=0).cpu()

    def click_nll(self) -> float:
        """The mean over sessions of each session's mean binary cross-entropy (nats)."""
        return self.nll_sum / self.sessions if self.sessions else math.nan

    def perplexity_per_rank(self) -> List[float]:
        """[N] ``2 ** -mean log2 P`` of each rank over the sessions showing it (NaN: never shown)."""
        shown = self.shown_per_rank.double()
        mean = torch.where(shown > 0, self.log2_per_rank / shown.clamp(min=1), torch.full_like(shown, math.nan))
        return torch.pow(2.0, -mean).tolist()

    def perplexity(self) -> float:
        """The mean of :meth:`perplexity_per_rank` over the ranks shown at least once."""
        values = [v for v in self.perplexity_per_rank() if not math.isnan(v)]
        return sum(values) / len(values) if values else math.nan

    def session_log_likelihood(self) -> float:
        """The mean over sessions of their summed log-likelihood (nats)."""
        return self.log_likelihood_sum / self.sessions if self.sessions else math.nan

    def as_dict(self) -> dict:
        """The numbers, JSON-ready."""
        return {"click_nll": self.click_nll(), "perplexity": self.perplexity(),
                "perplexity_per_rank": self.perplexity_per_rank(), "sessions": self.sessions,
                "shown_per_rank": self.shown_per_rank.tolist(), "log_likelihood": self.session_log_likelihood()}


def ranker_log_click(scores: torch.Tensor, examination: torch.Tensor) -> torch.Tensor:
    """[S, N] ln P(c = 1) of a ranker-plus-examination model: ``ln e_r + ln sigmoid(s)``, the click model
    ultr-reproducibility's IPS model reports (``logit(examination * sigmoid(relevance))``).

    Args:
        scores: [S, N] the ranker's scores (its relevance logits).
        examination: [N] P(examined | rank) in (0, 1].
    """
    return torch.log(examination.double()).to(scores.device) + torch.nn.functional.logsigmoid(scores.double())
