"""ULTRA's ULTRE layout (``main.py --click_model_dir``), turned into ULTRA's own layout in memory.

The layout, per split ``S`` of a data directory (with ``settings.json``):

- ``S/S.feature``: ``docid index:value ...``, one line per document; the
  document ids are strings, unique in the file;
- ``S/S.init_list``: ``qid:docid docid ...``, one line per logged list in
  displayed order (the first document was shown at position 1); a query may
  have several lines (several logged sessions);
- ``S/<click_model_dir>S.labels``: ``qid:c c ...``, per position of the
  matching ``.init_list`` line, the clicks of that session (0/1); when this
  file is missing, ULTRA's reader takes ``S/S.labels`` instead (the human
  relevance grades of the evaluation splits).  ``click_model_dir`` is
  concatenated as ULTRA does: ``"pbm/"`` means ``S/pbm/S.labels``.

ULTRA's reader keeps such a split as string ids and a ``features_dict``; its
own ``DirectLabelFeed`` reads it only with ``--data_format ULTRE`` and
``main.py --test_only`` does not pass that flag, so evaluation fails.
:func:`to_ultra_layout` rewrites the read data set into ULTRA's own layout
(``features`` rows and integer row indices in ``initial_list``), so that every
feed, algorithm and ULTRA's ranklist output work on it unchanged; our feeds
call it from ``preprocess_data``, the hook main.py calls right after reading
each split.  main.py's ``--data_format`` must then stay at its default
``ULTRA`` (:func:`preprocess_data` refuses ``ULTRE``).
"""
from __future__ import annotations

import os
from typing import Any

from ultra_multr.compat import runtime
from ultra_multr.data.feature_fields import DataCheckError


def labels_path(data_dir: str, split: str, click_model_dir: str) -> str:
    """The labels file ULTRA's reader takes for ``split``: the click model's when it exists, else ``S/S.labels``."""
    logged = os.path.join(data_dir, split, click_model_dir + split + ".labels")
    return logged if os.path.isfile(logged) else os.path.join(data_dir, split, split + ".labels")


def is_ultre(data_set: Any) -> bool:
    """Whether a ULTRA ``Raw_data`` holds a split read in the ULTRE layout (and not yet converted)."""
    return bool(getattr(data_set, "features_dict", None))


def to_ultra_layout(data_set: Any) -> None:
    """Rewrite a ULTRE-layout ``Raw_data`` in place into ULTRA's layout; others are left alone.

    ``features`` becomes one row per ``.feature`` line (``dids`` order),
    every ``initial_list`` entry the row index of its document id (positions
    unchanged), and ``features_dict`` is emptied (the rows share its lists).
    main.py's ``preprocess_data`` hook runs it before ``Raw_data.pad``; on a
    padded split the padding (-1) stays padding.

    Raises:
        DataCheckError: a listed document id has no ``.feature`` line.
    """
    if not is_ultre(data_set):
        return
    rows = {doc_id: row for row, doc_id in enumerate(data_set.dids)}
    data_set.features = [data_set.features_dict[doc_id] for doc_id in data_set.dids]
    converted = []
    for qid, documents in zip(data_set.qids, data_set.initial_list):
        try:
            # ints are Raw_data.pad's -1 (a split padded before conversion)
            converted.append([doc_id if isinstance(doc_id, int) else rows[doc_id] for doc_id in documents])
        except KeyError as error:
            raise DataCheckError(
                "%s%s/%s.init_list: query %s lists document %s, which has no line in %s.feature"
                % (data_set.data_path, data_set.file_prefix, data_set.file_prefix, qid, error.args[0],
                   data_set.file_prefix)
            ) from None
    data_set.initial_list = converted
    data_set.features_dict = {}


def preprocess_data(data_set: Any, hparam_str: str, exp_settings: dict) -> None:
    """ULTRA's ``BaseInputFeed.preprocess_data`` hook of our feeds: :func:`to_ultra_layout`.

    Raises:
        ValueError: main.py runs with ``--data_format`` other than ULTRA.
    """
    args = runtime.main_args()
    data_format = getattr(args, "data_format", "ULTRA") if args is not None else "ULTRA"
    if data_format != "ULTRA":
        raise ValueError(
            "main.py --data_format %s: leave the flag out. ultra_multr's feeds read ULTRE data (--click_model_dir) "
            "by converting it to ULTRA's layout when main.py reads it, and ULTRA's DirectLabelFeed would then look "
            "the converted documents up by their ULTRE ids" % data_format
        )
    to_ultra_layout(data_set)
