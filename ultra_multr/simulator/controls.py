"""Controls of MULTR's user simulator: what the doubly-robust loss does with a perfect simulator and with one that cannot debias.

``simulator_control`` (a MULTR hyper-parameter) picks one:

* ``"none"``: the trained context-aware simulator (MULTR itself).
* ``"true_click_model"``: the click model that generates the training
  clicks stands in for the simulator (:class:`TrueClickModelSimulator`):
  an upper bound, known only where clicks are simulated.  Nothing is trained
  and no session is drawn for it.
* ``"shuffled_positions"``: the simulator trains (and is measured) on
  sessions whose documents and clicks are moved together into a uniformly
  random order (:func:`shuffle_positions`).  It can still learn which
  documents get clicks, but not where: its examination curve is flat, the
  case (iii) of studies/estimator_targets/README.md (a wrong examination curve).
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np
import torch

from ultra_multr.batch import Batch
from ultra_multr.fingerprints import row_fingerprints
from ultra_multr.randomization import random_permutations

SIMULATOR_CONTROLS = ("none", "true_click_model", "shuffled_positions")


def shuffle_positions(batch: Batch, generator: torch.Generator) -> Batch:
    """The same sessions with each list's real documents (features and clicks together) in a uniformly random order.

    Args:
        batch: features [B, N, F], labels [B, N] clicks, mask [B, N] (padding at the tail stays there).
        generator: on the batch's device.

    Returns:
        a new Batch of the same shapes.
    """
    order = random_permutations(batch.mask, 1, generator)[:, 0]
    features = torch.gather(batch.features, 1, order.unsqueeze(-1).expand_as(batch.features))
    return Batch(features=features, labels=torch.gather(batch.labels, 1, order), mask=torch.gather(batch.mask, 1, order))


class TrueClickModelSimulator(torch.nn.Module):
    """The training feed's click model as a :class:`~ultra_multr.simulator.protocol.UserSimulator`, exact for
    main.py's stream.

    Documents are recognised by their feature row (:func:`ultra_multr.fingerprints.row_fingerprints`)
    and given their relevance label.  On an order pi of a list shown as sigma, the click probability
    at position t is the click model's marginal on pi divided by P(at least one click on sigma): the
    stream drops lists without a click, and a simulator trained on it learns clicks given one on the
    logged order (studies/estimator_targets/README.md, "exact for the stream").  Sampled pseudo clicks are
    independent Bernoulli draws of these marginals: the loss is linear in each document's pseudo
    click, so only the marginals enter its expectation.

    Args:
        click_model: an :class:`ultra_multr.click_models.ClickModel`.
        features: [R, F] float32 feature rows of the training documents.
        labels: [R] their relevance labels.
        list_size: N, positions per list.
        name: the click model's name, for :meth:`describe`.

    Raises:
        ValueError: two documents with the same features and different labels.
    """

    exact_probabilities = True

    def __init__(self, click_model: Any, features: np.ndarray, labels: np.ndarray, list_size: int,
                 name: str = "") -> None:
        super().__init__()
        keys = row_fingerprints(torch.as_tensor(features, dtype=torch.float32))
        labels_t = torch.as_tensor(labels, dtype=torch.float32)
        keys, order = torch.sort(keys)
        labels_t = labels_t[order]
        same = keys[1:] == keys[:-1]
        if bool((same & (labels_t[1:] != labels_t[:-1])).any()):
            raise ValueError(
                "simulator_control=true_click_model recognises documents by their features, but two training "
                "documents have the same features and different labels"
            )
        keep = torch.cat([torch.ones(1, dtype=torch.bool), ~same])
        self.register_buffer("keys", keys[keep])
        self.register_buffer("labels", labels_t[keep])
        self.click_model = click_model
        self.list_size = int(list_size)
        self.name = name or type(click_model).__name__

    @property
    def device(self) -> torch.device:
        return self.keys.device

    def describe(self) -> Dict[str, Any]:
        return {"kind": "true_click_model", "click_model": self.name}

    def document_labels(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[B, N] labels of the documents of features [B, N, F] (0 at padding).

        Raises:
            ValueError: a real document that is not among the training documents.
        """
        keys = row_fingerprints(features)
        index = torch.searchsorted(self.keys, keys).clamp(max=len(self.keys) - 1)
        if bool((mask & (self.keys[index] != keys)).any()):
            raise ValueError("simulator_control=true_click_model: a document outside the training split has no label")
        return torch.where(mask, self.labels[index], torch.zeros((), device=features.device))

    def click_probabilities(self, features, mask, orders, generator=None) -> torch.Tensor:
        """[B, P, N] click probability at each position of orders [B, P, N] (exact, float32)."""
        labels = self.document_labels(features, mask)
        batch, lists, slots = orders.shape
        on_order = torch.gather(labels.unsqueeze(1).expand(-1, lists, -1), 2, orders).reshape(-1, slots)
        shown = torch.gather(mask.unsqueeze(1).expand(-1, lists, -1), 2, orders).reshape(-1, slots)
        marginals = self.click_model.click_probabilities(on_order, shown).reshape(batch, lists, slots)
        no_click = self.click_model.log_likelihood(labels, torch.zeros_like(labels), mask).exp()
        any_click = (1.0 - no_click).clamp(min=1e-12).to(marginals.dtype)
        return (marginals / any_click.view(batch, 1, 1)).clamp(max=1.0).float()

    def sample_clicks(self, features, mask, orders, generator=None) -> torch.Tensor:
        """[B, P, N] 0/1 pseudo clicks: Bernoulli draws of :meth:`click_probabilities`."""
        p = self.click_probabilities(features, mask, orders)
        return (torch.rand(p.shape, generator=generator, device=p.device) < p).to(features.dtype)
