"""``logger_guard=order_fit``: MULTR's check, without labels, that its log's logger knew no more than the features.

Before the user simulator is trained on the click log, a small ranker is
fitted to the logged order of the training split's lists
(:func:`ultra_multr.logged_order.logged_order_fit`, on the first N positions
MULTR's simulator sees, most queries fitted and the rest held out).  When its
agreement with the logged order on the held-out pairs is below
``logger_guard_threshold``, the logger ordered by something the features do
not carry, which a simulator fitted to the log would take for position
(the stress group of studies/headroom); with fewer than
``logger_guard_min_queries`` training queries it cannot tell.  Either way it
fires: the simulator is not trained and MULTR trains with its host's own
ranking and propensity losses (DLA's), warned.  The decision, the agreement
and what it rests on go to the run's ledger (decision ``logger_guard``).

On generated sets the agreement was 0.984-0.995 on ten recipe sets of
studies/paper_setting and 0.824-0.838 on three stress sets of studies/headroom
(studies/paper_setting/results/logged_order.md), hence the default threshold
0.95.  The guard is on by default (``logger_guard=none`` switches it off, as
the paper's and the authors' settings files do): in the paper_setting grid it
fired on 3 of 3 stress sets, where MULTR without it was 0.053-0.099 nDCG@10
below DLA, and MULTR then trained exactly as DLA; it stays quiet on every
recipe set (docs/results.md).  With fewer than
``logger_guard_min_queries`` (50) training queries it fires too: on toy data
MULTR trains as DLA unless told ``logger_guard=none``.
"""
from __future__ import annotations

import numpy as np
import torch

from ultra_multr.feeds.arrays import QueryArrays, query_arrays
from ultra_multr.logged_order import OrderFit, logged_order_fit
from ultra_multr.session_budget import LEDGER
from ultra_multr.algorithms.base import LOGGER


def fit_to_logged_order(arrays: QueryArrays, seed: int) -> OrderFit:
    """:func:`ultra_multr.logged_order.logged_order_fit` on every list of ``arrays`` (their first N positions, in
    the logged order), with a generator seeded by ``seed``."""
    queries = np.arange(arrays.n_queries)
    return logged_order_fit(torch.from_numpy(arrays.list_features(queries)), torch.from_numpy(arrays.mask[queries]),
                            torch.Generator().manual_seed(seed))


def logger_guard_fires(algorithm) -> bool:
    """Run the check on ``algorithm``'s training split when it applies; record and return whether it fired.

    It applies under ``logger_guard=order_fit`` (the default) to a simulator that would be
    fitted to the log (``simulator_steps > 0`` and no ``simulator_control``).
    """
    config = algorithm.hparams
    if config.logger_guard == "none" or config.simulator_steps == 0 or config.simulator_control != "none":
        return False
    arrays = query_arrays(algorithm._train_set, algorithm.rank_list_size)
    record = {"guard": config.logger_guard, "threshold": config.logger_guard_threshold,
              "training_queries": arrays.n_queries, "min_queries": config.logger_guard_min_queries}
    if arrays.n_queries < config.logger_guard_min_queries:
        record.update(decision="too_few_queries", host_losses=True)
        LEDGER.record_decision("logger_guard", record)
        LOGGER.warning(
            "LOGGER GUARD: only %d training queries (< logger_guard_min_queries=%d), too few to tell whether the "
            "logging ranker knew more than the features. MULTR trains with %s's own ranking and propensity losses "
            "instead (logger_guard=none trains the simulator anyway)", arrays.n_queries,
            config.logger_guard_min_queries, algorithm.host_name(),
        )
        return True
    fit = fit_to_logged_order(arrays, config.seed)
    fired = fit.agreement < config.logger_guard_threshold
    record.update(decision="fired" if fired else "passed", host_losses=fired, agreement=fit.agreement,
                  heldout_queries=fit.heldout_queries, heldout_pairs=fit.heldout_pairs)
    LEDGER.record_decision("logger_guard", record)
    measured = "a ranker fitted to the logged order on the learner's features orders %.3f of the %d document " \
        "pairs of %d held-out queries as the logger did (logger_guard_threshold=%g)" % (
            fit.agreement, fit.heldout_pairs, fit.heldout_queries, config.logger_guard_threshold)
    if not fired:
        LOGGER.info("logger guard: passed: %s", measured)
        return False
    LOGGER.warning(
        "LOGGER GUARD FIRED: %s: the logging ranker ordered by something the features do not carry, which a user "
        "simulator fitted to this log would take for position. MULTR trains with %s's own ranking and propensity "
        "losses instead (logger_guard=none trains the simulator anyway)", measured, algorithm.host_name(),
    )
    return True
