"""The MULTR user simulator learns a cascade click model (issue: "On data
generated from a known cascade click model, the trained simulator's held-out
click log-likelihood comes within a few percent of the true model's")."""
import torch

from ultra_multr import click_models as cm
from ultra_multr.click_models.evaluation import (
    KnownClickModel,
    QueryLists,
    Sessions,
    SimulatorModel,
    fit_pbm,
    fit_simulator,
    score_models,
)
from ultra_multr.generate.ultra_dataset import iter_synthetic_queries
from ultra_multr.simulator import SimulatorTrainingConfig

N = 5


def query_lists(queries, n):
    """Top n of each synthetic query's initial list."""
    features = torch.zeros(len(queries), n, queries[0].features.shape[1])
    labels = torch.zeros(len(queries), n, dtype=torch.float64)
    mask = torch.zeros(len(queries), n, dtype=torch.bool)
    for q, query in enumerate(queries):
        k = min(n, len(query.labels))
        features[q, :k] = torch.as_tensor(query.features[:k], dtype=torch.float32)
        labels[q, :k] = torch.as_tensor(query.labels[:k])
        mask[q, :k] = True
    return QueryLists(features, labels, mask)


def sample(model, lists, n_sessions, generator):
    query = torch.randint(lists.n_queries, (n_sessions,), generator=generator)
    return Sessions(query, model.sample(lists.labels[query], lists.mask[query], generator).float())


#: The paper's training (teacher forcing on every click, no dropout, three action embeddings): the defaults before
#: studies/simulator_designs chose the authors' training.
PAPER_TRAINING = dict(teacher_forcing_ratio=1.0, teacher_forcing_unit="click", simulator_dropout=0.0,
                      simulator_actions=3)


def _fit_and_score(**training):
    lists = query_lists(list(iter_synthetic_queries(30, (3, 6), n_features=8, max_label=2, seed=1)), N)
    truth = cm.CascadeModel(cm.graded_click_prob(0.1, 2))
    generator = torch.Generator().manual_seed(0)
    train, heldout = sample(truth, lists, 3000, generator), sample(truth, lists, 5000, generator)
    config = SimulatorTrainingConfig(simulator_steps=300, simulator_batch_size=128, simulator_learning_rate=0.01,
                                     simulator_hidden_size=32, simulator_eval_every=50, simulator_log_every=0,
                                     **training)
    simulator, _ = fit_simulator(lists, train, config, torch.Generator().manual_seed(1))
    return score_models(
        [KnownClickModel(truth), SimulatorModel(simulator, ctr_samples=50), fit_pbm(lists, train)], lists, heldout
    )


def test_simulator_comes_within_a_few_percent_of_the_true_cascade_model():
    true, learned, pbm = _fit_and_score(**PAPER_TRAINING)
    assert learned.log_likelihood < true.log_likelihood
    assert (true.log_likelihood - learned.log_likelihood) / abs(true.log_likelihood) < 0.05
    # It learned the cascade (no click after a click), which a PBM cannot express.
    assert learned.log_likelihood > pbm.log_likelihood
    assert learned.perplexity < pbm.perplexity


def test_the_default_training_still_learns_the_cascade_a_pbm_cannot_express():
    """The default (the authors' training: half its batches decoded from its own sampled clicks, dropout 0.4) gives
    up held-out likelihood on the logged sessions (about 15 % off the truth here, where the paper's training is
    within 5 %) for clicks that stay right on re-ranked lists (studies/simulator_designs); it still beats a PBM."""
    true, learned, pbm = _fit_and_score()
    assert pbm.log_likelihood < learned.log_likelihood < true.log_likelihood
