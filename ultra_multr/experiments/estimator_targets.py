"""What MULTR's per-document loss weights estimate, in closed form and through MULTR's code.

Setting: one query of N documents shown in a fixed logged order, position-based
clicks (examination e_k at position k, click-if-examined r_d), lists without a
click dropped as main.py's feed drops them.  The randomisation target of a
document is T_d = mean_k(e_k) r_d, its click probability under uniformly random
orders; the ranker only needs each document's weight proportional to T_d
within a list (studies/estimator_targets/README.md).

Both sides read the weights from the one place MULTR's loss computes them,
:meth:`ultra_multr.losses.dr.DoublyRobustLoss.weights`:
:func:`expected_weights` enumerates each document's outcomes (its real click,
its pseudo click on the logged order, the mean of its pseudo clicks over the
re-rankings) with their probabilities and takes the expectation of the
weights of every outcome; :func:`monte_carlo_weights` reads them from MULTR's
doubly-robust part on batches of MULTR's own training feed.
:class:`KnownClickSimulator` is a known position-based model behind the
:class:`~ultra_multr.simulator.UserSimulator` interface, exact for the stream in
its marginals on the logged order: on any order of the query's documents it
clicks d at position k with probability ``e~_k r~_d / P~`` (clamped at 1 when
sampling), P~ its own probability of at least one click on the logged order.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, Sequence, Tuple

import numpy as np
import torch

from ultra_multr.losses import DoublyRobustLoss
from ultra_multr.data.ultra_format import RankedQuery, write_settings, write_split

N_FEATURES = 4


@dataclass(frozen=True)
class Setting:
    """One estimator setting: MULTR's hparams and how the closed form reads them.

    Attributes:
        name: row label.
        form: "mixture" (Eq. dr_loss at ``rerank_weight`` a) or "randomized".
        a: the mixture's re-ranked share (unused by "randomized").
        variant: "dr" or "eib".
        guard: "none" or "clip".
        imputation: "sampled" or "expected".
    """

    name: str
    form: str
    a: float
    variant: str
    guard: str
    imputation: str

    def loss(self) -> DoublyRobustLoss:
        """The loss object of this setting (the mixture at a)."""
        mixture = self.form == "mixture"
        return DoublyRobustLoss(form=self.form, variant=self.variant, guard=self.guard,
                                rerank_weight=self.a if mixture else None)

    def hparams(self, sample_num: int, imputation_samples: int) -> str:
        weight = "randomized" if self.form == "randomized" else repr(self.a)
        return (
            "sample_num=%d,simulator_steps=0,rerank_weight=%s,variant=%s,dr_weight_guard=%s,imputation=%s,"
            "imputation_samples=%d,seed=0,device=cpu"
            % (sample_num, weight, self.variant, self.guard, self.imputation, imputation_samples)
        )


@dataclass(frozen=True)
class Case:
    """The truth and what MULTR is given: [N] arrays by logged position.

    Attributes:
        name: row label.
        exam, relevance: the true examination by position and click-if-examined
            by logged position.
        sim_exam, sim_relevance: the simulator's.
        propensity: DLA's propensities by position (any scale).
    """

    name: str
    exam: np.ndarray
    relevance: np.ndarray
    sim_exam: np.ndarray
    sim_relevance: np.ndarray
    propensity: np.ndarray


def any_click(exam: np.ndarray, relevance: np.ndarray) -> float:
    """P(at least one click) of a position-based list."""
    return float(1.0 - np.prod(1.0 - exam * relevance))


def stream_terms(case: Case) -> Dict[str, np.ndarray]:
    """[N] expectations on the stream: real clicks, the simulator's on the
    logged order and its mean over uniform re-rankings, and the target."""
    p_true = any_click(case.exam, case.relevance)
    p_sim = any_click(case.sim_exam, case.sim_relevance)
    return {
        "click": case.exam * case.relevance / p_true,
        "observed": case.sim_exam * case.sim_relevance / p_sim,
        "randomized": case.sim_exam.mean() * case.sim_relevance / p_sim,
        "target": case.exam.mean() * case.relevance,
    }


def _outcomes(setting: Setting, terms: Dict[str, np.ndarray], sample_num: int) -> Tuple[np.ndarray, ...]:
    """Each document's outcomes and their probabilities: (clicks, observed, re-ranked mean) [K] values and [K, N]
    probabilities, K enumerating a real click c ~ Bern(E[c | any]), a pseudo click on the logged order
    c^o ~ Bern(p^o) and the mean of S pseudo clicks over uniform re-rankings ~ Binomial(S, m) / S, each
    independent; ``expected`` imputation replaces c^o and the mean by p^o and m (one outcome each)."""
    from scipy.stats import binom

    click = terms["click"]
    n = len(click)
    clicks, click_probs = np.array([0.0, 1.0]), np.stack([1 - click, click])
    if setting.imputation == "expected":
        observed, observed_probs = terms["observed"][None], np.ones((1, n))
        means, mean_probs = terms["randomized"][None], np.ones((1, n))
    else:
        p_obs, m = np.minimum(terms["observed"], 1.0), np.minimum(terms["randomized"], 1.0)
        observed, observed_probs = np.array([0.0, 1.0])[:, None].repeat(n, 1), np.stack([1 - p_obs, p_obs])
        counts = np.arange(sample_num + 1)
        means, mean_probs = (counts / sample_num)[:, None].repeat(n, 1), binom.pmf(counts[:, None], sample_num, m[None])
    grid = np.meshgrid(np.arange(2), np.arange(len(observed)), np.arange(len(means)), indexing="ij")
    c, o, r = (index.reshape(-1) for index in grid)
    probabilities = click_probs[c] * observed_probs[o] * mean_probs[r]
    return clicks[c][:, None].repeat(n, 1), observed[o], means[r], probabilities


def expected_weights(setting: Setting, case: Case, sample_num: int) -> np.ndarray:
    """[N] E[W_d] on the stream, exact (guard included): the expectation over each document's outcomes
    (:func:`_outcomes`) of :meth:`~ultra_multr.losses.dr.DoublyRobustLoss.weights` (a document's weight depends
    on its own outcomes and the list's propensities only)."""
    clicks, observed, means, probabilities = _outcomes(setting, stream_terms(case), sample_num)
    ipw = torch.as_tensor(case.propensity[0] / case.propensity).expand(len(clicks), -1)
    as_tensor = lambda values: torch.as_tensor(values, dtype=torch.float64)  # noqa: E731
    weights = setting.loss().weights(as_tensor(clicks), as_tensor(observed), as_tensor(means).unsqueeze(1), ipw,
                                     torch.ones(clicks.shape, dtype=torch.bool))
    return (weights.guarded.numpy() * probabilities).sum(0)


def deviation(weights: np.ndarray, target: np.ndarray) -> np.ndarray:
    """[N] relative deviation from proportional: (W / T) / mean(W / T) - 1."""
    ratio = weights / target
    return ratio / ratio.mean() - 1.0


# -- MULTR's code path ------------------------------------------------------

class KnownClickSimulator(torch.nn.Module):
    """A position-based click model as a :class:`~ultra_multr.simulator.UserSimulator` (exact probabilities).

    Documents are recognised by their first feature (unique per document of
    the one-query data set of :func:`write_one_query_data`).

    Args:
        first_features: [D] the first feature of each document.
        relevance: [D] the simulator's click-if-examined of each document.
        exam: [N] its examination by position.
        logged_any_click: its P(at least one click) on the logged order (the
            stream's scale, :func:`stream_terms`).
    """

    exact_probabilities = True

    def __init__(self, first_features, relevance, exam, logged_any_click: float) -> None:
        super().__init__()
        order = torch.argsort(torch.as_tensor(first_features, dtype=torch.float32))
        self.register_buffer("keys", torch.as_tensor(first_features, dtype=torch.float32)[order])
        self.register_buffer("relevance", torch.as_tensor(relevance, dtype=torch.float64)[order])
        self.register_buffer("exam", torch.as_tensor(exam, dtype=torch.float64))
        self.scale = 1.0 / logged_any_click
        self.list_size = len(exam)

    @property
    def device(self) -> torch.device:
        return self.keys.device

    def describe(self) -> Dict[str, Any]:
        return {"kind": "known_position_based", "exam": self.exam.tolist()}

    def _probabilities(self, features, mask, orders) -> torch.Tensor:
        index = torch.searchsorted(self.keys, features[..., 0].contiguous()).clamp(max=len(self.keys) - 1)
        relevance = torch.where(mask, self.relevance[index], torch.zeros((), dtype=torch.float64))
        by_position = torch.gather(relevance.unsqueeze(1).expand_as(orders), 2, orders)
        return by_position * self.exam[: orders.shape[-1]] * self.scale

    def click_probabilities(self, features, mask, orders, generator=None):
        """[B, P, N] exact click probabilities by position (float32)."""
        return self._probabilities(features, mask, orders).float()

    def sample_clicks(self, features, mask, orders, generator=None):
        """[B, P, N] 0/1 clicks by position, Bernoulli(min(p, 1))."""
        p = self._probabilities(features, mask, orders).clamp(max=1.0)
        return (torch.rand(p.shape, generator=generator, dtype=torch.float64) < p).float()


def write_one_query_data(directory: str, labels: Sequence[float], seed: int = 0) -> str:
    """A ULTRA data directory whose train split is one query, documents in the given order."""
    rng = np.random.default_rng(seed)
    n = len(labels)
    features = rng.normal(size=(n, N_FEATURES))
    query = RankedQuery(
        qid="q0", doc_ids=["d%d" % i for i in range(n)], features=features,
        labels=np.asarray(labels, dtype=float), initial_scores=-np.arange(n, dtype=float),
    )
    write_split(directory, "train", [query])
    write_settings(directory, N_FEATURES, float(max(labels)))
    return os.path.join(os.path.abspath(directory), "")


def pbm_json(path: str, click_prob: Sequence[float], exam: Sequence[float]) -> str:
    with open(path, "w") as handle:
        json.dump({"model_name": "position_biased_model", "click_prob": list(click_prob),
                   "exam_prob": list(exam), "eta": 1.0}, handle)
    return path


def build_multr(data_dir: str, click_model_json: str, hparams: str, batch_size: int):
    """MULTR on the one-query data set, wired as main.py wires it, and its training feed."""
    import ultra

    from ultra_multr.algorithms.multr import MULTR

    data = ultra.utils.read_data(data_dir, "train", None, 0)
    settings = {
        "train_input_feed": "ultra_multr.feeds.ClickSimulationFeed",
        "train_input_hparams": "click_model_json=%s,seed=0" % click_model_json,
        "ranking_model": "ultra.ranking_model.DNN",
        "ranking_model_hparams": "hidden_layer_sizes=[8]",
        "learning_algorithm": "ultra_multr.MULTR",
        "learning_algorithm_hparams": hparams,
        "metrics": ["ndcg"], "metrics_topn": [10],
        "max_candidate_num": data.rank_list_size, "selection_bias_cutoff": data.rank_list_size,
    }
    data.pad(data.rank_list_size)
    model = MULTR(data, settings)
    return model, model.simulator_phase.clicks.new_feed(batch_size), data


def install(model, case: Case, data) -> None:
    """Plug the case's simulator and propensities into a built MULTR (in place of training)."""
    first = np.asarray(data.features, dtype=np.float32)[:, 0]
    relevance_by_doc = np.empty(len(first))
    relevance_by_doc[np.asarray(data.initial_list[0])] = case.sim_relevance
    simulator = KnownClickSimulator(first, relevance_by_doc, case.sim_exam, any_click(case.sim_exam, case.sim_relevance))
    model.doubly_robust.use(simulator, model.simulator_phase.clicks)
    assert model.hparams.logits_to_prob == "softmax" and model.hparams.max_propensity_weight <= 0
    log_propensity = np.log(case.propensity)
    with torch.no_grad():  # logits >= 0 pass DenoisingNet's ELU unchanged; their softmax is the propensities'
        model.propensity_model.linear_layer.weight.copy_(torch.as_tensor(log_propensity - log_propensity.min()))
        model.propensity_model.linear_layer.bias.zero_()


def monte_carlo_weights(model, feed, data, batches: int) -> Tuple[np.ndarray, np.ndarray]:
    """Mean and standard error [N] of the guarded weights MULTR's loss gives a batch of its training feed
    (:meth:`~ultra_multr.components.doubly_robust.DoublyRobust.document_weights`, with DLA's propensity weights of
    the batch), over ``batches`` batches."""
    seen = []
    clicks = model.simulator_phase.clicks
    with torch.no_grad():
        for _ in range(batches):
            batch = clicks.draw(feed, data)
            ipw = model.propensity_weights(model.propensity_model(batch.labels.t()), batch.mask)
            seen.append(model.doubly_robust.document_weights(batch, ipw).guarded.double())
    weights = torch.cat(seen).numpy()
    return weights.mean(0), weights.std(0) / np.sqrt(weights.shape[0])
