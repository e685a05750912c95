"""A batch of ranked lists as tensors on one device, built from ULTRA's input feed dictionary."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Sequence

import numpy as np
import torch


@dataclass
class Batch:
    """A batch of ranked lists, as tensors on one device.

    Attributes:
        features: [B, L, F] float32; padded slots are zero vectors.
        labels: [B, L] float32 clicks (or relevance labels); 0 in padded slots.
        mask: [B, L] bool, True for real documents.
    """

    features: torch.Tensor
    labels: torch.Tensor
    mask: torch.Tensor

    @property
    def batch_size(self) -> int:
        return int(self.features.shape[0])


def batch_from_input_feed(
    input_feed: Dict[str, np.ndarray],
    docid_names: Sequence[str],
    label_names: Sequence[str],
    device: torch.device,
) -> Batch:
    """Turn ULTRA's input feed dictionary into a :class:`Batch`.

    ULTRA's feeds give ``letor_features`` [D, F] and, per list position i,
    ``docid_input{i}`` (float32 row indices into the features; the value D
    marks padding) and ``label{i}``.  ``BaseAlgorithm.create_input_feed``
    casts the float32 arrays with ``torch.as_tensor(..., dtype=int64)``,
    which raises TypeError on numpy >= 1.25; we stack and cast in numpy.
    """
    letor = np.asarray(input_feed["letor_features"], dtype=np.float32)
    n_docs = letor.shape[0]
    if letor.ndim != 2:  # an empty batch arrives as shape (0,)
        raise ValueError("input feed has no documents (letor_features shape %s)" % (letor.shape,))
    doc_ids = np.stack([np.asarray(input_feed[n]) for n in docid_names], axis=1).astype(np.int64)
    labels = np.stack([np.asarray(input_feed[n], dtype=np.float32) for n in label_names], axis=1)
    mask = (doc_ids >= 0) & (doc_ids < n_docs)
    padded = np.concatenate([letor, np.zeros((1, letor.shape[1]), dtype=np.float32)], axis=0)
    features = padded[np.where(mask, doc_ids, n_docs)]
    labels = np.where(mask, labels, 0.0).astype(np.float32)
    return Batch(
        features=torch.from_numpy(features).to(device),
        labels=torch.from_numpy(labels).to(device),
        mask=torch.from_numpy(mask).to(device),
    )
