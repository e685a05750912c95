"""What MULTR's per-document loss weights estimate, in closed form and through MULTR's code.

Setting: one query of N documents shown in a fixed logged order, position-based
clicks (examination e_k at position k, click-if-examined r_d), lists without a
click dropped as main.py's feed drops them.  The randomisation target of a
document is T_d = mean_k(e_k) r_d, its click probability under uniformly random
orders; the ranker only needs each document's weight proportional to T_d
within a list (studies/estimator_targets/README.md).

:class:`KnownClickSimulator` plugs a known position-based model into MULTR's
simulator interface (``sample_clicks``, ``sampled_click_probabilities``), exact
for the stream in its marginals on the logged order: on any order of the
query's documents it clicks d at position k with probability
``e~_k r~_d / P~`` (clamped at 1 when sampling), P~ its own probability of at
least one click on the logged order.  :func:`expected_weights` gives each
setting's expected weights in closed form; :func:`monte_carlo_weights` reads
them from ``MULTR.training_loss`` on batches of MULTR's own training feed.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Dict, Sequence, Tuple
from unittest import mock

import numpy as np
import torch

from ultra_multr import losses
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


def _expect_over(values: np.ndarray, probabilities: np.ndarray, guard: str) -> np.ndarray:
    """E[guard(values)] over outcomes [..., K] with probabilities [..., K]."""
    guarded = np.maximum(values, 0.0) if guard == "clip" else values
    return (guarded * probabilities).sum(-1)


def expected_weights(setting: Setting, case: Case, sample_num: int) -> np.ndarray:
    """[N] E[W_d] on the stream, exact (guard included).

    A document's weight depends on its own real click c ~ Bern(E[c | any]),
    pseudo click c^o ~ Bern(p^o) and mean_s c^s ~ Binomial(S, m) / S (uniform
    re-rankings: each c^s is Bern(m), independent); ``expected`` imputation
    replaces c^o and mean_s c^s by p^o and m.
    """
    terms = stream_terms(case)
    ratio_w = case.propensity[0] / case.propensity
    ratio_bar = case.propensity.mean() / case.propensity
    from scipy.stats import binom

    click, p_obs, m = terms["click"], np.minimum(terms["observed"], 1.0), np.minimum(terms["randomized"], 1.0)
    if setting.imputation == "expected":
        p_obs, m = terms["observed"], terms["randomized"]
        obs_values, obs_probs = p_obs[:, None], np.ones((len(click), 1))
        mean_values, mean_probs = m[:, None], np.ones((len(click), 1))
    else:
        obs_values, obs_probs = np.array([0.0, 1.0])[None].repeat(len(click), 0), np.stack([1 - p_obs, p_obs], 1)
        counts = np.arange(sample_num + 1)
        mean_values = (counts / sample_num)[None].repeat(len(click), 0)
        mean_probs = binom.pmf(counts[None], sample_num, m[:, None])
    c = np.array([0.0, 1.0])
    c_probs = np.stack([1 - click, click], 1)
    # outcomes [N, 2 (c), Ko, Km]
    cv = c[None, :, None, None]
    ov = obs_values[:, None, :, None]
    mv = mean_values[:, None, None, :]
    if setting.form == "randomized":
        values = mv + (cv - ov) * ratio_bar[:, None, None, None]
    elif setting.variant == "eib":
        values = (1 - setting.a) * cv + setting.a * mv + 0.0 * ov
    else:
        values = (1 - setting.a) * (ov + (cv - ov) * ratio_w[:, None, None, None]) + setting.a * mv
    probs = c_probs[:, :, None, None] * obs_probs[:, None, :, None] * mean_probs[:, None, None, :]
    n = len(click)
    if setting.guard == "rebalance":  # losses.rebalance_weights; expected imputation: one pseudo-click outcome
        no_click, with_click = values[:, 0, 0, 0], values[:, 1, 0, 0]
        moved = (no_click + (with_click - no_click) * p_obs) / p_obs
        values = np.stack([np.where(no_click < 0, 0.0, no_click), np.where(no_click < 0, moved, with_click)], 1)
        return (values * c_probs).sum(-1)
    return _expect_over(values.reshape(n, -1), probs.reshape(n, -1), setting.guard)


def deviation(weights: np.ndarray, target: np.ndarray) -> np.ndarray:
    """[N] relative deviation from proportional: (W / T) / mean(W / T) - 1."""
    ratio = weights / target
    return ratio / ratio.mean() - 1.0


# -- MULTR's code path ------------------------------------------------------

class KnownClickSimulator(torch.nn.Module):
    """A position-based click model behind MULTR's simulator interface.

    Documents are recognised by their first feature (unique per document of
    the one-query data set of :func:`write_one_query_data`).

    Args:
        first_features: [D] the first feature of each document.
        relevance: [D] the simulator's click-if-examined of each document.
        exam: [N] its examination by position.
        logged_any_click: its P(at least one click) on the logged order (the
            stream's scale, :func:`stream_terms`).
    """

    def __init__(self, first_features, relevance, exam, logged_any_click: float) -> None:
        super().__init__()
        order = torch.argsort(torch.as_tensor(first_features, dtype=torch.float32))
        self.register_buffer("keys", torch.as_tensor(first_features, dtype=torch.float32)[order])
        self.register_buffer("relevance", torch.as_tensor(relevance, dtype=torch.float64)[order])
        self.register_buffer("exam", torch.as_tensor(exam, dtype=torch.float64))
        self.scale = 1.0 / logged_any_click
        self.anchor = torch.nn.Parameter(torch.zeros(()))  # the device, as PseudoClickCache reads it
        self.config = type("Config", (), {"list_size": len(exam)})()

    def _probabilities(self, features, mask, orders) -> torch.Tensor:
        index = torch.searchsorted(self.keys, features[..., 0].contiguous()).clamp(max=len(self.keys) - 1)
        relevance = torch.where(mask, self.relevance[index], torch.zeros((), dtype=torch.float64))
        by_position = torch.gather(relevance.unsqueeze(1).expand_as(orders), 2, orders)
        return by_position * self.exam[: orders.shape[-1]] * self.scale

    def sampled_click_probabilities(self, features, mask, orders, generator=None, **_):
        """[B, P, N] exact click probabilities by position (float32)."""
        return self._probabilities(features, mask, orders).float()

    def sample_clicks(self, features, mask, orders, generator=None, **_):
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
    return model, model._click_feed(batch_size=batch_size), data


def install(model, case: Case, data) -> None:
    """Plug the case's simulator and propensities into a built MULTR (in place of training)."""
    first = np.asarray(data.features, dtype=np.float32)[:, 0]
    relevance_by_doc = np.empty(len(first))
    relevance_by_doc[np.asarray(data.initial_list[0])] = case.sim_relevance
    simulator = KnownClickSimulator(first, relevance_by_doc, case.sim_exam, any_click(case.sim_exam, case.sim_relevance))
    model.simulator = model.sampler = simulator
    model._simulator_ready = True
    if model.hparams.imputation == "expected":
        from ultra_multr.feeds.arrays import query_arrays
        from ultra_multr.imputation import PseudoClickCache

        model.pseudo_click_cache = PseudoClickCache(simulator, model.hparams.imputation_samples, model.generator)
        model.pseudo_click_cache.add_query_arrays(query_arrays(data, simulator.config.list_size))
    assert model.hparams.logits_to_prob == "softmax" and model.hparams.max_propensity_weight <= 0
    log_propensity = np.log(case.propensity)
    with torch.no_grad():  # logits >= 0 pass DenoisingNet's ELU unchanged; their softmax is the propensities'
        model.propensity_model.linear_layer.weight.copy_(torch.as_tensor(log_propensity - log_propensity.min()))
        model.propensity_model.linear_layer.bias.zero_()


def monte_carlo_weights(model, feed, data, batches: int) -> Tuple[np.ndarray, np.ndarray]:
    """Mean and standard error [N] of the guarded weights ``MULTR.training_loss``
    passes to the listwise loss, over ``batches`` batches of its training feed."""
    seen = []
    real = losses.dr.weighted_listwise_loss

    def spy(scores, mask, document_weights, normalization):
        seen.append(document_weights.detach().double())
        return real(scores, mask, document_weights, normalization)

    with mock.patch.object(losses.dr, "weighted_listwise_loss", spy), torch.no_grad():
        for _ in range(batches):
            model.training_loss(model._session_batch(feed, data))
    weights = torch.cat(seen).numpy()
    return weights.mean(0), weights.std(0) / np.sqrt(weights.shape[0])
