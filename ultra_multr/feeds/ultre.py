"""A feed that replays logged sessions: each list in its logged order, with its logged clicks.

:class:`UltreSessionFeed` is the training feed for a click log in ULTRA's
ULTRE layout (``main.py --click_model_dir``, see :mod:`ultra_multr.data.ultre`),
for MULTR and every baseline: each ``.init_list`` line is one session, its
documents fed at the positions they were shown at (slot i = position i + 1),
its labels (the session's clicks) fed as the clicks.  Nothing is simulated.
It reads ULTRA-layout data as well (a list's labels are then its clicks, as
Tiangong-ULTR's training split has them), and with relevance labels it is an
evaluation feed like ULTRA's ``DirectLabelFeed``, which main.py ``--test_only``
cannot run on ULTRE data.

Differences from ``DirectLabelFeed``: training batches are drawn from the
feed's own seeded generator (uniformly over the lists, or over those with a
click in the first N positions when main.py asks to skip lists without
one: the distribution of ULTRA's redraws, without the redraws); padding is
never fed as a document; and ``logged_sessions_per_list = 1`` tells MULTR that
every list is a fixed logged session, so its user simulator holds a seeded
share of the sessions out (``simulator_heldout_fraction``) instead of
scoring itself on the sessions it trains on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Tuple

import numpy as np
import torch

from ultra_multr.data import ultre
from ultra_multr.feeds.arrays import QueryArrays, build_input_feed, query_arrays
from ultra_multr.feeds.session_replay import SessionReplayFeed


@dataclass(frozen=True)
class UltreSessionFeedHParams:
    """Hyper-parameters of :class:`UltreSessionFeed`.

    Attributes:
        seed: seed of the training batches' draws.
        use_max_candidate_num: feed every position of the longest list
            (evaluation, as ``DirectLabelFeed``'s default); false: the first
            ``selection_bias_cutoff`` positions, what the user saw (training).
    """

    seed: int = 0
    use_max_candidate_num: bool = True


class UltreSessionFeed(SessionReplayFeed):
    """Replays logged sessions (see the module docstring). Hyper-parameters: :class:`UltreSessionFeedHParams`."""

    HPARAMS = UltreSessionFeedHParams
    #: main.py's hook after reading each split: ULTRE-layout data becomes ULTRA's layout.
    preprocess_data = staticmethod(ultre.preprocess_data)
    data_format_note = " (ULTRE data is converted to ULTRA's layout when it is read)"

    def __init__(self, model: Any, batch_size: int, hparam_str: str) -> None:
        super().__init__(model, batch_size, hparam_str)
        self.rank_list_size = int(model.max_candidate_num if self.hparams.use_max_candidate_num else model.rank_list_size)
        self._arrays: Dict[int, Tuple[QueryArrays, np.ndarray]] = {}

    def arrays_for(self, data_set: Any) -> Tuple[QueryArrays, np.ndarray]:
        """The data set's first N positions and [C] int64 the lists with a click among them (built once)."""
        cached = self._arrays.get(id(data_set))
        if cached is None or cached[0].data_set is not data_set:
            ultre.to_ultra_layout(data_set)  # a data set not read through main.py's preprocess_data hook
            arrays = query_arrays(data_set, self.rank_list_size)
            cached = (arrays, np.flatnonzero(arrays.labels.sum(axis=1) > 0))
            self._arrays[id(data_set)] = cached
        return cached

    def get_batch(self, data_set: Any, check_validation: bool = False, data_format: str = "ULTRA"):
        """``batch_size`` lists drawn uniformly (with ``check_validation``: among those with a click).

        Raises:
            ValueError: ``check_validation`` and no list has a click in the first N positions.
        """
        self._check_format(data_format)
        arrays, clicked = self.arrays_for(data_set)
        candidates = clicked if check_validation else np.arange(arrays.n_queries)
        if candidates.size == 0:
            raise ValueError(
                "UltreSessionFeed: none of the %d lists of %s%s has a click in its first %d positions"
                % (arrays.n_queries, getattr(data_set, "data_path", ""), getattr(data_set, "file_prefix", ""),
                   self.rank_list_size)
            )
        pick = candidates[torch.randint(candidates.size, (self.batch_size,), generator=self.generator).numpy()]
        return self.replay(arrays, pick, len(pick))

    def get_next_batch(self, index: int, data_set: Any, check_validation: bool = False, data_format: str = "ULTRA"):
        """Lists ``index .. index + batch_size - 1`` in order (evaluation); with ``check_validation`` those with a click."""
        self._check_format(data_format)
        arrays, _ = self.arrays_for(data_set)
        return self._lists(arrays, np.arange(index, min(index + self.batch_size, arrays.n_queries)), check_validation)

    def get_data_by_index(self, data_set: Any, index: int, check_validation: bool = False):
        """The single list ``index`` (none if ``check_validation`` drops it)."""
        arrays, _ = self.arrays_for(data_set)
        return self._lists(arrays, np.array([index]), check_validation)

    def _lists(self, arrays: QueryArrays, query_idx: np.ndarray, check_validation: bool):
        clicks = arrays.labels[query_idx]
        if check_validation:
            keep = clicks.sum(axis=1) > 0
            query_idx, clicks = query_idx[keep], clicks[keep]
        return build_input_feed(self.model, arrays, query_idx, clicks)
