"""What the feeds that replay logged sessions share: :class:`SessionReplayFeed`.

Its subclasses, :class:`~ultra_multr.feeds.ultre.UltreSessionFeed` (a
click log in ULTRA's ULTRE or own layout, read by main.py) and
:class:`~ultra_multr.feeds.baidu.BaiduSessionFeed` (Baidu-ULTR files,
read by the feed), feed every list as one fixed logged session: its
documents at the positions they were shown at, its logged clicks as the
clicks; nothing is simulated.  What is left to them is where the sessions
come from and how a :func:`~ultra_multr.feeds.arrays.query_subset` view selects them.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np
import torch
from ultra.input_layer import BaseInputFeed

from ultra_multr.compat.settings_check import check_main_py_settings
from ultra_multr.config import parse_hparams
from ultra_multr.feeds.arrays import QueryArrays, build_input_feed
from ultra_multr.session_budget import LEDGER


class SessionReplayFeed(BaseInputFeed):
    """A feed of logged sessions (see the module docstring).

    Subclasses set ``HPARAMS`` (a frozen dataclass with a ``seed``, the seed
    of :attr:`generator`) and ``rank_list_size`` (N, the positions fed).
    """

    HPARAMS: type
    #: Every list is one fixed logged session (MULTR holds sessions out of its simulator).
    logged_sessions_per_list = 1
    #: Said after the refusal of a ``data_format`` other than ULTRA.
    data_format_note = ""

    def __init__(self, model: Any, batch_size: int, hparam_str: str) -> None:
        check_main_py_settings(model)  # all of main.py's hyper-parameter strings, before the first batch
        self.hparams = parse_hparams(self.HPARAMS, hparam_str, source="%s hparams" % type(self).__name__)
        self.generator = torch.Generator().manual_seed(self.hparams.seed)
        self.model = model
        self.batch_size = int(batch_size)
        self.global_batch_count = 0

    def _check_format(self, data_format: str) -> None:
        if data_format != "ULTRA":
            raise ValueError("%s: data_format=%r; leave main.py's --data_format out%s"
                             % (type(self).__name__, data_format, self.data_format_note))

    def replay(
        self, arrays: QueryArrays, rows: np.ndarray, n_read: int
    ) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
        """A training batch of the logged lists ``rows`` of ``arrays`` with their clicks (``arrays.labels``),
        counted in the batches and in the run's click budget (:mod:`ultra_multr.session_budget`).

        Args:
            arrays: the logged lists' first N positions; their labels are the logged clicks.
            rows: [B] int64 the lists of the batch.
            n_read: the sessions read to find them (those a batch skipped included).

        Returns:
            (input_feed, info_map) of :func:`~ultra_multr.feeds.arrays.build_input_feed`.
        """
        clicks = arrays.labels[rows]
        self.global_batch_count += 1
        LEDGER.record(n_read, len(rows), clicks=float(clicks.sum()))
        return build_input_feed(self.model, arrays, rows, clicks)
