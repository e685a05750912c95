"""Fit classic click models to click sessions (and the user simulator, by
MULTR's own trainer: :func:`fit_simulator`) and score click models on
held-out sessions, in pure torch (no ULTRA import).

Setting: every query shows one fixed list (the top N of its initial list), so
a query-document pair is a (query, position) pair.  A *session* is one
query's list with its clicks.  Sessions on other orders of the same
documents are scored on :meth:`QueryLists.rows` (one row per session) by the
models' :meth:`SessionModel.for_rows`, which moves per-document parameters
with their documents.

Models are scored by what they predict for each position t of a held-out
session given the session's clicks above t:

* ``P(c_t | c_<t)``: for the learned simulator and a fitted cascade this is
  the conditional the model defines; for a PBM, whose clicks are independent,
  it is the marginal ``gamma_t * alpha_qd``; for a known click model it is
  computed exactly from its session likelihood as
  ``P(c_<=t) / P(c_<t)`` on the list cut after t.  With conditionals, a
  session's log-likelihood is the sum over its positions, and no model can
  beat the true one in expectation, per position or per session.
* log-likelihood per position t: mean over the sessions showing t of
  ``ln P(c_t | c_<t)`` (nats); per session: mean of the sum over positions.
* perplexity per position: ``2 ** -(mean of log2 P(c_t | c_<t))``
  (= ``exp(-log-likelihood_t)``); overall: the mean of the per-position
  perplexities (Dupret & Piwowarski 2008).  1 is perfect, 2 is a coin flip.
* click-through rate per position: observed, and predicted as the mean over
  the held-out sessions of the model's marginal ``P(c_t = 1)`` for the
  session's query (exact for PBM, cascade and known models; Monte-Carlo for
  the simulator).

Every predicted probability is clipped to ``[PROB_FLOOR, 1 - PROB_FLOOR]``,
so an event a model deems impossible (a second click, for a cascade) costs
``ln PROB_FLOOR`` instead of minus infinity; for a correct model this changes
a position's log-likelihood by less than ``2 * PROB_FLOOR``.

Shapes: Q queries, N positions, F features, S sessions.
"""
from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from ultra_multr.click_models import ClickModel
from ultra_multr.config import require
from ultra_multr.batch import Batch
from ultra_multr.simulator import SimulatorFit, SimulatorTrainingConfig, TrainableSimulator, build_simulator, train_simulator

PROB_FLOOR = 1e-6
#: Sessions per forward pass of the simulator when scoring (bounds memory).
EVAL_CHUNK = 4096


@dataclass
class QueryLists:
    """The displayed list of every query.

    Attributes:
        features: [Q, N, F] float32, zero vectors at padded slots.
        labels: [Q, N] float relevance labels, 0 at padded slots.
        mask: [Q, N] bool, True where a document is shown.
    """

    features: torch.Tensor
    labels: torch.Tensor
    mask: torch.Tensor

    @property
    def n_queries(self) -> int:
        return int(self.mask.shape[0])

    @property
    def n_positions(self) -> int:
        return int(self.mask.shape[1])

    def rows(self, query: torch.Tensor, order: Optional[torch.Tensor] = None) -> "QueryLists":
        """The lists of ``query`` [S], each shown in its own ``order``.

        Args:
            query: [S] int64 query of each row.
            order: [S, N] int64, ``order[s, t]`` is the slot of query[s]'s
                list whose document row s shows at position t (padded slots
                must map to padded slots); None keeps every list as it is.

        Returns:
            QueryLists of S rows ([S, N, F] features, [S, N] labels and mask).
        """
        lists = QueryLists(self.features[query], self.labels[query], self.mask[query])
        if order is None:
            return lists
        return QueryLists(
            features=torch.gather(lists.features, 1, order.unsqueeze(-1).expand_as(lists.features)),
            labels=torch.gather(lists.labels, 1, order),
            mask=torch.gather(lists.mask, 1, order),
        )


@dataclass
class Sessions:
    """Click sessions on :class:`QueryLists`.

    Attributes:
        query: [S] int64 index of each session's query.
        clicks: [S, N] float 0/1 clicks, 0 at padded slots.
    """

    query: torch.Tensor
    clicks: torch.Tensor

    def __len__(self) -> int:
        return int(self.query.shape[0])

    def mask(self, lists: QueryLists) -> torch.Tensor:
        """[S, N] bool: positions shown in each session."""
        return lists.mask[self.query]


class SessionModel(abc.ABC):
    """What the report needs from a click model."""

    name = "model"

    @abc.abstractmethod
    def conditional_click_probs(self, lists: QueryLists, sessions: Sessions) -> torch.Tensor:
        """[S, N] float64 P(c_t = 1 | the session's clicks above t)."""

    @abc.abstractmethod
    def click_rates(self, lists: QueryLists) -> torch.Tensor:
        """[Q, N] float64 marginal P(c_t = 1) of each query's list; 0 at padding."""

    def for_rows(self, query: torch.Tensor, order: torch.Tensor) -> "SessionModel":
        """This model on ``lists.rows(query, order)`` (shapes there).

        A model that reads only the lists' labels or features is the same
        model there; one with parameters per (query, slot) must override
        this to move them with the documents.
        """
        return self


# -- known click models ----------------------------------------------------------


class KnownClickModel(SessionModel):
    """A :class:`ultra_multr.click_models.ClickModel` with exact numbers."""

    def __init__(self, model: ClickModel, name: str = "true") -> None:
        self.model = model
        self.name = name

    def conditional_click_probs(self, lists, sessions):
        labels, mask = lists.labels[sessions.query], sessions.mask(lists)
        positions = torch.arange(lists.n_positions)
        # ln P(c_<t) for t = 0..N: the session likelihood of the list cut before t.
        prefix = [torch.zeros(len(sessions), dtype=torch.float64)]
        clicked_at = []
        for t in range(lists.n_positions):
            cut = mask & (positions <= t)
            prefix.append(self.model.log_likelihood(labels, sessions.clicks * cut, cut))
            with_click = torch.where(positions == t, 1.0, sessions.clicks) * cut
            clicked_at.append(self.model.log_likelihood(labels, with_click, cut))
        # Where t is padded, with_click clicks a padded slot: -inf, probability 0.
        # After a prefix the model cannot produce (-inf - -inf) the conditional
        # is undefined: take 0 (the session's likelihood is floored anyway).
        probs = torch.exp(torch.stack(clicked_at, dim=1) - torch.stack(prefix[:-1], dim=1))
        return torch.nan_to_num(probs, nan=0.0)

    def click_rates(self, lists):
        return self.model.click_probabilities(lists.labels, lists.mask)


# -- fitted baselines ------------------------------------------------------------


@dataclass
class _PairCounts:
    """Per (query, position) counts over training sessions. All [Q, N] float64."""

    clicks: torch.Tensor
    shown: torch.Tensor


def _count(lists: QueryLists, sessions: Sessions, counted: torch.Tensor) -> _PairCounts:
    """Sum ``clicks`` and ``counted`` [S, N] (bool) per (query, position)."""
    clicks = torch.zeros(lists.mask.shape, dtype=torch.float64)
    shown = torch.zeros(lists.mask.shape, dtype=torch.float64)
    clicks.index_add_(0, sessions.query, (sessions.clicks * counted).double())
    shown.index_add_(0, sessions.query, counted.double())
    return _PairCounts(clicks, shown)


def _posterior_mean(successes: torch.Tensor, trials: torch.Tensor, prior_mean: float, strength: float) -> torch.Tensor:
    """Beta(strength * m, strength * (1 - m)) posterior mean; the prior mean where never observed."""
    return (successes + strength * prior_mean) / (trials + strength)


class FittedPBM(SessionModel):
    """Position-based model: ``P(c_t = 1) = gamma_t * alpha_qd``, clicks independent.

    Attributes:
        exam: [N] examination probability gamma per position.
        attractiveness: [Q, N] alpha per query-document pair (the prior mean
            for pairs never shown in training).
    """

    name = "PBM (fitted)"

    def __init__(self, exam: torch.Tensor, attractiveness: torch.Tensor) -> None:
        self.exam = exam
        self.attractiveness = attractiveness

    def click_rates(self, lists):
        return torch.where(lists.mask, self.exam * self.attractiveness, 0.0)

    def conditional_click_probs(self, lists, sessions):
        return self.click_rates(lists)[sessions.query]

    def for_rows(self, query, order):
        """Examination stays with the position, attractiveness moves with the document."""
        return FittedPBM(self.exam, torch.gather(self.attractiveness[query], 1, order))


def fit_pbm(lists: QueryLists, sessions: Sessions, iterations: int = 200, prior_strength: float = 1.0) -> FittedPBM:
    """Maximum a-posteriori PBM by expectation-maximisation.

    A skipped document was either not examined or not attractive; the E-step
    splits each (query, position)'s skips between the two.  Attractiveness
    has a Beta prior of ``prior_strength`` pseudo-sessions whose mean is the
    current mean attractiveness of the pairs seen in training (the back-off
    for unseen pairs).  With fixed lists a pair is always at one position,
    so only the product gamma_t * alpha_qd of a seen pair is identified; the
    prior splits it.
    """
    require(iterations > 0, "iterations must be > 0, got %d" % iterations)
    counts = _count(lists, sessions, sessions.mask(lists))
    skips = counts.shown - counts.clicks
    seen = counts.shown > 0
    exam = torch.full((lists.n_positions,), 0.5, dtype=torch.float64)
    attractiveness = torch.full(lists.mask.shape, 0.5, dtype=torch.float64)
    prior_mean = 0.5
    for _ in range(iterations):
        no_click = (1.0 - exam * attractiveness).clamp(min=PROB_FLOOR)
        attracted = counts.clicks + skips * attractiveness * (1.0 - exam) / no_click
        examined = counts.clicks + skips * exam * (1.0 - attractiveness) / no_click
        attractiveness = _posterior_mean(attracted, counts.shown, prior_mean, prior_strength)
        exam = examined.sum(0) / counts.shown.sum(0).clamp(min=1.0)
        prior_mean = float(attractiveness[seen].mean()) if bool(seen.any()) else 0.5
    attractiveness = torch.where(seen, attractiveness, torch.full_like(attractiveness, prior_mean))
    return FittedPBM(exam, attractiveness)


class FittedCascade(SessionModel):
    """Cascade model: scan top-down, click an examined document with
    ``alpha_qd``, stop at the first click.

    Attributes:
        attractiveness: [Q, N] alpha per query-document pair.
    """

    name = "cascade (fitted)"

    def __init__(self, attractiveness: torch.Tensor) -> None:
        self.attractiveness = attractiveness

    def click_rates(self, lists):
        alpha = torch.where(lists.mask, self.attractiveness, 0.0)
        no_click_before = torch.cumprod(1.0 - alpha, dim=1)
        reached = torch.cat([torch.ones_like(alpha[:, :1]), no_click_before[:, :-1]], dim=1)
        return reached * alpha

    def conditional_click_probs(self, lists, sessions):
        clicked_before = (torch.cumsum(sessions.clicks, dim=1) - sessions.clicks) > 0
        return torch.where(clicked_before, 0.0, self.attractiveness[sessions.query])

    def for_rows(self, query, order):
        return FittedCascade(torch.gather(self.attractiveness[query], 1, order))


def fit_cascade(lists: QueryLists, sessions: Sessions, prior_strength: float = 1.0) -> FittedCascade:
    """Maximum a-posteriori cascade model (closed form).

    A document is examined when it is shown at or above the session's first
    click (every shown document in a session without clicks); alpha is its
    clicks over its examinations, with a Beta prior of ``prior_strength``
    pseudo-examinations whose mean is the overall click rate of examined
    documents (the back-off for unseen pairs).  Clicks below the first are
    outside the model and ignored.
    """
    clicks_so_far = torch.cumsum(sessions.clicks, dim=1)
    examined = sessions.mask(lists) & ((clicks_so_far - sessions.clicks) == 0)
    counts = _count(lists, sessions, examined)
    total = float(counts.shown.sum())
    prior_mean = float(counts.clicks.sum()) / total if total > 0 else 0.5
    return FittedCascade(_posterior_mean(counts.clicks, counts.shown, prior_mean, prior_strength))


# -- the learned simulator -------------------------------------------------------


class SimulatorModel(SessionModel):
    """A trained user simulator (any design) as a session model.

    Args:
        ctr_samples: sessions sampled per query for :meth:`click_rates`.
        generator: randomness of those samples.
    """

    name = "MULTR simulator"

    def __init__(
        self, simulator: TrainableSimulator, ctr_samples: int = 200, generator: Optional[torch.Generator] = None
    ) -> None:
        self.simulator = simulator
        self.ctr_samples = ctr_samples
        self.generator = generator

    def conditional_click_probs(self, lists, sessions):
        self.simulator.eval()
        probs = []
        with torch.no_grad():
            for start in range(0, len(sessions), EVAL_CHUNK):
                query = sessions.query[start : start + EVAL_CHUNK]
                logits = self.simulator.click_logits(
                    lists.features[query], lists.mask[query], sessions.clicks[start : start + EVAL_CHUNK]
                )
                probs.append(torch.sigmoid(logits.double()))
        return torch.cat(probs)

    def click_rates(self, lists):
        self.simulator.eval()
        rates = []
        chunk = max(1, EVAL_CHUNK // self.ctr_samples)
        with torch.no_grad():
            for start in range(0, lists.n_queries, chunk):
                mask = lists.mask[start : start + chunk]
                orders = torch.arange(lists.n_positions).expand(mask.shape[0], self.ctr_samples, -1)
                features = lists.features[start : start + chunk]
                clicks = self.simulator.sample_clicks(features, mask, orders, self.generator)
                rates.append(clicks.double().mean(dim=1))
        return torch.cat(rates)


class SessionSample:
    """Batches of ``batch_size`` sessions drawn uniformly with replacement (those without a click
    included), as a :class:`ultra_multr.simulator.trainer.SessionStream`.

    Args:
        lists: what the sessions show; sessions: the sessions drawn from.
        generator: the draws' randomness; its state is the stream's.
    """

    def __init__(self, lists: QueryLists, sessions: Sessions, batch_size: int, generator: torch.Generator) -> None:
        self.lists, self.sessions, self.batch_size, self.generator = lists, sessions, batch_size, generator

    def next_batch(self) -> Batch:
        """[B, N, F] features, [B, N] clicks and mask of B drawn sessions."""
        pick = torch.randint(len(self.sessions), (self.batch_size,), generator=self.generator)
        query = self.sessions.query[pick]
        lists = self.lists
        return Batch(features=lists.features[query], labels=self.sessions.clicks[pick], mask=lists.mask[query])

    def state(self) -> Dict[str, torch.Tensor]:
        return {"generator": self.generator.get_state()}

    def restore(self, state: Dict[str, torch.Tensor]) -> None:
        self.generator.set_state(state["generator"])


def fit_simulator(
    lists: QueryLists, sessions: Sessions, config: SimulatorTrainingConfig, generator: torch.Generator
) -> Tuple[TrainableSimulator, SimulatorFit]:
    """A new user simulator trained on ``sessions`` by MULTR's trainer
    (:func:`ultra_multr.simulator.trainer.train_simulator`), held out as MULTR holds out a fixed click log:
    a random ``simulator_heldout_fraction`` of the sessions (:meth:`SimulatorTrainingConfig.heldout_count`)
    is never trained on, and ``simulator_heldout_batches`` batches drawn from it measure the simulator for
    early stopping.  Everything random, the initial weights included, comes from ``generator``.

    Returns:
        (simulator in eval mode, its fit).

    Raises:
        ValueError: fewer than 2 sessions (none would be left to train on).
    """
    with torch.random.fork_rng(devices=[]):  # leave the caller's global generator alone
        torch.manual_seed(int(torch.randint(2**62, (1,), generator=generator)))
        simulator = build_simulator(config.simulator_config(lists.features.shape[2], lists.n_positions))
    n_heldout = config.heldout_count(len(sessions))
    order = torch.randperm(len(sessions), generator=generator)
    held, kept = order[:n_heldout], order[n_heldout:]
    heldout_draws = SessionSample(lists, Sessions(sessions.query[held], sessions.clicks[held]),
                                  config.simulator_batch_size, generator)
    heldout = [heldout_draws.next_batch() for _ in range(config.simulator_heldout_batches)]
    training = SessionSample(lists, Sessions(sessions.query[kept], sessions.clicks[kept]),
                             config.simulator_batch_size, generator)
    fit = train_simulator(simulator, config, training, heldout, n_heldout, generator)
    simulator.eval()
    return simulator, fit


# -- scores ----------------------------------------------------------------------


def slot_log_likelihood(probs: torch.Tensor, sessions: Sessions, lists: QueryLists) -> torch.Tensor:
    """[S, N] float64 ln P(c_t | c_<t) of the observed clicks, 0 at padded slots."""
    p = probs.clamp(PROB_FLOOR, 1.0 - PROB_FLOOR)
    log_prob = torch.where(sessions.clicks > 0, torch.log(p), torch.log1p(-p))
    return torch.where(sessions.mask(lists), log_prob, 0.0)


@dataclass
class ModelScores:
    """A model's numbers on held-out sessions (positions never shown: NaN).

    Attributes:
        name: the model's name.
        log_likelihood: per-session mean of ln P(session) (nats).
        perplexity: mean of the per-position perplexities.
        log_likelihood_per_position: [N] mean ln P(c_t | c_<t).
        perplexity_per_position: [N].
        ctr_per_position: [N] predicted click-through rate.
        reliability: per bin of predicted P(c_t | c_<t):
            {"lower", "upper", "count", "predicted", "observed"}.
    """

    name: str
    log_likelihood: float
    perplexity: float
    log_likelihood_per_position: List[float]
    perplexity_per_position: List[float]
    ctr_per_position: List[float]
    reliability: List[Dict[str, float]]


def _mean_per_position(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[S, N] -> [N] mean over the sessions showing each position (NaN if none)."""
    shown = mask.double().sum(0)
    total = torch.where(mask, values.double(), 0.0).sum(0)
    return torch.where(shown > 0, total / shown.clamp(min=1), math.nan)


def observed_ctr(lists: QueryLists, sessions: Sessions) -> List[float]:
    """[N] observed click-through rate per position."""
    return _mean_per_position(sessions.clicks, sessions.mask(lists)).tolist()


def reliability_bins(
    probs: torch.Tensor, clicks: torch.Tensor, mask: torch.Tensor, n_bins: int = 10
) -> List[Dict[str, float]]:
    """Observed click frequency per equal-width bin of predicted probability (non-empty bins)."""
    p, c = probs[mask].clamp(0.0, 1.0), clicks[mask].double()
    index = torch.clamp((p * n_bins).long(), max=n_bins - 1)
    bins = []
    for b in range(n_bins):
        chosen = index == b
        count = int(chosen.sum())
        if count:
            bins.append(
                {
                    "lower": b / n_bins,
                    "upper": (b + 1) / n_bins,
                    "count": count,
                    "predicted": float(p[chosen].mean()),
                    "observed": float(c[chosen].mean()),
                }
            )
    return bins


def score_model(model: SessionModel, lists: QueryLists, heldout: Sessions) -> ModelScores:
    """Every number of :class:`ModelScores` for ``model`` on ``heldout``."""
    require(len(heldout) > 0, "no held-out sessions")
    mask = heldout.mask(lists)
    probs = model.conditional_click_probs(lists, heldout)
    log_lik = slot_log_likelihood(probs, heldout, lists)
    per_position = _mean_per_position(log_lik, mask)
    perplexity = torch.exp(-per_position)
    return ModelScores(
        name=model.name,
        log_likelihood=float(log_lik.sum(1).mean()),
        perplexity=float(perplexity[~torch.isnan(perplexity)].mean()),
        log_likelihood_per_position=per_position.tolist(),
        perplexity_per_position=perplexity.tolist(),
        ctr_per_position=_mean_per_position(model.click_rates(lists)[heldout.query], mask).tolist(),
        reliability=reliability_bins(probs, heldout.clicks, mask),
    )


def score_models(models: Sequence[SessionModel], lists: QueryLists, heldout: Sessions) -> List[ModelScores]:
    return [score_model(model, lists, heldout) for model in models]
