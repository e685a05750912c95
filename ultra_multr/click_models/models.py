"""Click models over batches of ranked lists, in pure torch (no ULTRA import).

Every model here follows the examination hypothesis: a document is clicked
when the user examines it and finds it attractive.  Attractiveness depends on
the document's integer relevance label ``y`` through ``click_prob[y]`` (the
relevance -> click-probability mapping); examination depends on the model:

* :class:`PositionBasedModel` (PBM): examined at rank ``t`` with
  ``exam_prob[t]``, independently of everything else.
* :class:`DependentClickModel` (DCM): the user scans top-down; after a click
  at rank ``t`` they go on with probability ``continuation_prob[t]``.
* :class:`CascadeModel`: the DCM that never goes on -- the first click ends
  the session (the MULTR paper's protocol).
* :class:`UserBrowsingModel` (UBM): examination depends on the rank and on
  the distance to the previous click.

Parameters keep the semantics of ULTRA's click-model JSON files
(``click_prob``, ``exam_prob``, ``eta``): a per-rank list whose last value
repeats for lower ranks, and for UBM ULTRA's triangular table.  Unlike ULTRA,
labels outside ``0..len(click_prob)-1`` are refused (ULTRA silently maps them
to the top grade) and padded slots are never examined nor clicked.

Shapes: labels, clicks and mask are [B, N] (B lists, N positions); mask is
bool and True for real documents.  Probabilities are computed in float64.
"""
from __future__ import annotations

import abc
import logging
import math
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import torch

PROB_DTYPE = torch.float64

logger = logging.getLogger(__name__)


class LabelRangeError(ValueError):
    """Relevance labels the click model has no click probability for."""


def graded_click_prob(noise: float, max_label: int) -> List[float]:
    """The paper's relevance mapping (Chapelle et al. 2009):
    ``noise + (1 - noise) * (2**y - 1) / (2**max_label - 1)`` for y = 0..max_label.
    """
    if not 0.0 <= noise <= 1.0:
        raise ValueError("noise must be in [0, 1], got %r" % noise)
    if int(max_label) != max_label or max_label < 1:
        raise ValueError("max_label must be an integer >= 1, got %r" % max_label)
    top = 2.0 ** max_label - 1.0
    return [noise + (1.0 - noise) * (2.0 ** y - 1.0) / top for y in range(int(max_label) + 1)]


def reciprocal_rank_exam_prob(eta: float, n_positions: int) -> List[float]:
    """PBM examination ``(1 / rank) ** eta`` for ranks 1..n_positions."""
    return [(1.0 / rank) ** eta for rank in range(1, n_positions + 1)]


def per_rank(values: torch.Tensor, n_positions: int) -> torch.Tensor:
    """[n_positions] values by rank; ranks past the list reuse its last value
    (as ULTRA's ``getExamProb``)."""
    index = torch.clamp(torch.arange(n_positions), max=values.numel() - 1)
    return values[index]


def _probabilities(values: Any, what: str) -> torch.Tensor:
    """A non-empty 1-D list of probabilities as a float64 tensor."""
    tensor = torch.as_tensor(values, dtype=PROB_DTYPE)
    if tensor.ndim != 1 or tensor.numel() == 0:
        raise ValueError("%s must be a non-empty list of numbers, got %r" % (what, values))
    if not bool(((tensor >= 0) & (tensor <= 1)).all()):
        raise ValueError("%s must hold probabilities in [0, 1], got %r" % (what, values))
    return tensor


def check_description_keys(desc: Mapping[str, Any], required: Sequence[str], optional: Sequence[str], model: str) -> None:
    """Refuse a click-model JSON dict that lacks a required key or has an unknown one.

    Raises:
        ValueError: naming ``model``, the missing and unknown keys and the accepted ones.
    """
    known = set(required) | set(optional) | {"model_name"}
    missing = [k for k in required if k not in desc]
    unknown = sorted(k for k in desc if k not in known)
    if missing or unknown:
        raise ValueError(
            "%s description: missing %s, unknown %s; accepted keys: %s"
            % (model, missing or "nothing", unknown or "nothing", ", ".join(sorted(known)))
        )


def _session_log_prob(p: torch.Tensor, clicks: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, N] log P(click_t) for independent Bernoulli(p) slots; a padded
    slot contributes 0 when not clicked and -inf when clicked."""
    log_prob = torch.where(clicks > 0, torch.log(p), torch.log1p(-p))
    return torch.where(mask, log_prob, torch.where(clicks > 0, -math.inf, 0.0))


class ClickModel(abc.ABC):
    """A click model whose attractiveness is ``click_prob[label]``.

    Attributes:
        name: the ``model_name`` of its description (ULTRA's names for PBM,
            UBM and cascade).
        click_prob: [G] click probability of an examined document of label
            0..G-1.
        eta: position-bias severity the examination parameters were built
            with; :meth:`with_eta` rescales them.
    """

    name = "click_model"

    def __init__(self, click_prob: Sequence[float], eta: float = 1.0) -> None:
        self.click_prob = _probabilities(click_prob, "click_prob")
        self.eta = float(eta)

    @property
    def max_label(self) -> int:
        return self.click_prob.numel() - 1

    # -- labels ---------------------------------------------------------
    def check_max_label(self, max_label: float, source: str) -> None:
        """Refuse data whose largest label this model has no probability for.

        Raises:
            LabelRangeError: naming ``source``, the label and the range.
        """
        if max_label > self.max_label:
            raise LabelRangeError(
                "%s: labels reach %g but the %s click model covers labels 0..%d only "
                "(click_prob has %d entries); use a click model built for labels 0..%g"
                % (source, max_label, self.name, self.max_label, self.click_prob.numel(), max_label)
            )
        if max_label < self.max_label:
            # Legal, but not the paper's protocol, whose top grade is the data's.
            logger.warning(
                "%s: labels reach only %g but the %s click model covers labels 0..%d; the data's top grade "
                "gets click probability %.3g, not %.3g",
                source, max_label, self.name, self.max_label,
                float(self.click_prob[max(int(max_label), 0)]), float(self.click_prob[-1]),
            )

    def relevance(self, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[B, N] click probability if examined; 0 at padded slots.

        Raises:
            LabelRangeError: a real slot's label is not an integer in 0..max_label.
        """
        real = labels[mask]
        bad = (real != torch.round(real)) | (real < 0) | (real > self.max_label)
        if bool(bad.any()):
            raise LabelRangeError(
                "label %g is not an integer in 0..%d, the range of this %s click model (click_prob has %d entries)"
                % (float(real[bad][0]), self.max_label, self.name, self.click_prob.numel())
            )
        index = torch.where(mask, labels, torch.zeros_like(labels)).long()
        probs = self.click_prob.to(labels.device)[index]
        return torch.where(mask, probs, torch.zeros_like(probs))

    # -- the model ------------------------------------------------------
    @abc.abstractmethod
    def click_probabilities(self, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[B, N] marginal probability of a click at each position (exact)."""

    @abc.abstractmethod
    def sample_with_probabilities(
        self, labels: torch.Tensor, mask: torch.Tensor, generator: torch.Generator
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample one session per list.

        Returns:
            clicks: [B, N] 0/1 in ``labels.dtype``, 0 at padded slots;
            exam_p: [B, N] examination probability the sampler used at each
                position, given what it sampled before (ULTRA's exam_p_list);
            click_p: [B, N] click probability if examined (ULTRA's click_p_list).
        """

    def sample(self, labels: torch.Tensor, mask: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """[B, N] sampled 0/1 clicks, 0 at padded slots."""
        return self.sample_with_probabilities(labels, mask, generator)[0]

    @abc.abstractmethod
    def log_likelihood(self, labels: torch.Tensor, clicks: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[B] exact log-probability of each click session (float64); -inf for
        a session the model cannot produce, e.g. a click on a padded slot."""

    @abc.abstractmethod
    def describe(self) -> Dict[str, Any]:
        """JSON-compatible description; ``from_description`` inverts it."""

    @classmethod
    @abc.abstractmethod
    def from_description(cls, desc: Mapping[str, Any]) -> "ClickModel":
        """Build from a click-model JSON dict (``model_name`` is not checked)."""

    @abc.abstractmethod
    def with_eta(self, eta: float) -> "ClickModel":
        """The same model with position-bias severity ``eta``: examination
        parameters raised to the power ``eta / self.eta``.  For a description
        whose ``exam_prob`` is ULTRA's table to the power eta, this is what
        ULTRA's ``setExamProb(eta)`` computes."""

    def _eta_power(self, eta: float) -> float:
        if self.eta <= 0 or eta < 0:
            raise ValueError(
                "cannot change eta from %g to %g: both must be >= 0 and the current one > 0" % (self.eta, eta)
            )
        return eta / self.eta


class PositionBasedModel(ClickModel):
    """PBM: P(click at t) = exam_prob[t] * click_prob[y_t], independently."""

    name = "position_biased_model"

    def __init__(self, click_prob: Sequence[float], exam_prob: Sequence[float], eta: float = 1.0) -> None:
        super().__init__(click_prob, eta)
        self.exam_prob = _probabilities(exam_prob, "exam_prob")

    def _examination(self, mask: torch.Tensor) -> torch.Tensor:
        exam = per_rank(self.exam_prob, mask.shape[1]).to(mask.device)
        return torch.where(mask, exam.expand(mask.shape), torch.zeros((), dtype=PROB_DTYPE, device=mask.device))

    def click_probabilities(self, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self._examination(mask) * self.relevance(labels, mask)

    def sample_with_probabilities(self, labels, mask, generator):
        exam, click_p = self._examination(mask), self.relevance(labels, mask)
        uniform = torch.rand(labels.shape, generator=generator, dtype=PROB_DTYPE, device=labels.device)
        clicks = (uniform < exam * click_p).to(labels.dtype)
        return clicks, exam, click_p

    def log_likelihood(self, labels, clicks, mask):
        return _session_log_prob(self.click_probabilities(labels, mask), clicks, mask).sum(dim=1)

    def describe(self) -> Dict[str, Any]:
        return {
            "model_name": self.name,
            "eta": self.eta,
            "click_prob": self.click_prob.tolist(),
            "exam_prob": self.exam_prob.tolist(),
        }

    @classmethod
    def from_description(cls, desc):
        check_description_keys(desc, ["click_prob", "exam_prob"], ["eta"], cls.name)
        return cls(desc["click_prob"], desc["exam_prob"], desc.get("eta", 1.0))

    def with_eta(self, eta: float) -> "PositionBasedModel":
        return PositionBasedModel(self.click_prob, self.exam_prob ** self._eta_power(eta), eta)


class DependentClickModel(ClickModel):
    """DCM: scan top-down; a document reached at rank t is clicked with
    ``a_t = exam_prob[t] * click_prob[y_t]``; after a click the user goes on
    with ``continuation_prob[t]``, otherwise stops.  ``exam_prob`` (default
    all ones) keeps the semantics of ULTRA's cascade JSON, which multiplies
    it into each click.

    P(reach t) = prod_{s<t} (1 - a_s (1 - continuation_s)), and
    P(click at t) = P(reach t) * a_t.
    """

    name = "dependent_click_model"

    def __init__(
        self,
        click_prob: Sequence[float],
        continuation_prob: Sequence[float],
        exam_prob: Sequence[float] = (1.0,),
        eta: float = 1.0,
    ) -> None:
        super().__init__(click_prob, eta)
        self.continuation_prob = _probabilities(continuation_prob, "continuation_prob")
        self.exam_prob = _probabilities(exam_prob, "exam_prob")

    def _attraction(self, labels: torch.Tensor, mask: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """a: [B, N] click probability when reached; lam: [N] continuation."""
        n = labels.shape[1]
        exam = per_rank(self.exam_prob, n).to(labels.device)
        lam = per_rank(self.continuation_prob, n).to(labels.device)
        return exam * self.relevance(labels, mask), lam

    @staticmethod
    def _reached(stops: torch.Tensor) -> torch.Tensor:
        """[B, N] product over earlier positions of (1 - stops): an exclusive cumprod."""
        keep = torch.cumprod(1.0 - stops, dim=1)
        return torch.cat([torch.ones_like(keep[:, :1]), keep[:, :-1]], dim=1)

    def click_probabilities(self, labels, mask):
        a, lam = self._attraction(labels, mask)
        return self._reached(a * (1.0 - lam)) * a

    def sample_with_probabilities(self, labels, mask, generator):
        # Draw attraction and continuation at every position at once; the
        # draws at positions the user never reaches are simply unused, so
        # this is the sequential process without a loop.
        a, lam = self._attraction(labels, mask)
        attracted = torch.rand(a.shape, generator=generator, dtype=PROB_DTYPE, device=a.device) < a
        goes_on = torch.rand(a.shape, generator=generator, dtype=PROB_DTYPE, device=a.device) < lam
        reached = self._reached((attracted & ~goes_on).to(PROB_DTYPE))
        clicks = (reached.bool() & attracted).to(labels.dtype)
        exam = per_rank(self.exam_prob, labels.shape[1]).to(labels.device)
        return clicks, reached * exam * mask, self.relevance(labels, mask)

    def log_likelihood(self, labels, clicks, mask):
        a, lam = self._attraction(labels, mask)
        clicked = clicks > 0
        positions = torch.arange(labels.shape[1], device=labels.device)
        last = torch.where(clicked, positions, -1).max(dim=1).values  # [B], -1 without clicks
        upto_last = positions <= last[:, None]
        # Up to the last click the user is known to examine every position;
        # after each click but the last they went on.
        went_on = torch.where(positions < last[:, None], torch.log(lam), 0.0)
        head = torch.where(clicked, torch.log(a) + went_on, torch.log1p(-a))
        head = torch.where(upto_last, head, 0.0).sum(dim=1)
        # After the last click: stop, or go on and click nothing more.
        no_more = torch.where(upto_last, 0.0, torch.log1p(-a)).sum(dim=1)
        lam_last = lam[last.clamp(min=0)]
        tail = torch.where(last >= 0, torch.log((1.0 - lam_last) + lam_last * torch.exp(no_more)), no_more)
        # A click on a padded slot (a = 0) already gives log(0) = -inf in head.
        return head + tail

    def describe(self) -> Dict[str, Any]:
        return {
            "model_name": self.name,
            "eta": self.eta,
            "click_prob": self.click_prob.tolist(),
            "continuation_prob": self.continuation_prob.tolist(),
            "exam_prob": self.exam_prob.tolist(),
        }

    @classmethod
    def from_description(cls, desc):
        check_description_keys(desc, ["click_prob", "continuation_prob"], ["exam_prob", "eta"], cls.name)
        return cls(desc["click_prob"], desc["continuation_prob"], desc.get("exam_prob", (1.0,)), desc.get("eta", 1.0))

    def with_eta(self, eta: float) -> "DependentClickModel":
        return DependentClickModel(
            self.click_prob, self.continuation_prob, self.exam_prob ** self._eta_power(eta), eta
        )


class CascadeModel(DependentClickModel):
    """Cascade: scan top-down, the first click ends the session.

    With ``click_prob = graded_click_prob(0.1, max_label)`` and ``exam_prob``
    all ones this is the MULTR paper's click simulation:
    P(click at t) = r_t * prod_{s<t} (1 - r_s).
    """

    name = "cascade_model"

    def __init__(self, click_prob: Sequence[float], exam_prob: Sequence[float] = (1.0,), eta: float = 1.0) -> None:
        super().__init__(click_prob, (0.0,), exam_prob, eta)

    def describe(self) -> Dict[str, Any]:
        desc = super().describe()
        del desc["continuation_prob"]
        return desc

    @classmethod
    def from_description(cls, desc):
        check_description_keys(desc, ["click_prob"], ["exam_prob", "eta"], cls.name)
        return cls(desc["click_prob"], desc.get("exam_prob", (1.0,)), desc.get("eta", 1.0))

    def with_eta(self, eta: float) -> "CascadeModel":
        return CascadeModel(self.click_prob, self.exam_prob ** self._eta_power(eta), eta)


class UserBrowsingModel(ClickModel):
    """UBM: examination at rank t depends on the rank of the previous click.

    ``exam_prob`` is ULTRA's triangular table: row t (t = 0..T-1) has t+1
    entries and ``exam_prob[t][t - j - 1]`` is the examination probability
    at rank t when the previous click was at rank j (j = -1: no click yet,
    the row's last entry).  Ranks t >= T use the last row: its last entry
    without a previous click, else entry ``min(t - j - 1, T - 2)``.
    """

    name = "user_browsing_model"

    def __init__(self, click_prob: Sequence[float], exam_prob: Sequence[Sequence[float]], eta: float = 1.0) -> None:
        super().__init__(click_prob, eta)
        if not exam_prob or any(len(row) != t + 1 for t, row in enumerate(exam_prob)):
            raise ValueError(
                "exam_prob of a user browsing model must be a triangular table whose row t has t+1 entries, got %r"
                % (exam_prob,)
            )
        self.exam_table = [_probabilities(row, "exam_prob[%d]" % t) for t, row in enumerate(exam_prob)]
        self._matrices: Dict[int, torch.Tensor] = {}  # built once per list length

    def examination_matrix(self, n_positions: int) -> torch.Tensor:
        """[N, N+1] examination at rank t (row) when the previous click was at
        rank j, stored in column j+1 (column 0: no click yet).  Columns j >= t
        are impossible and hold 0."""
        if n_positions not in self._matrices:
            self._matrices[n_positions] = self._build_examination_matrix(n_positions)
        return self._matrices[n_positions]

    def _build_examination_matrix(self, n_positions: int) -> torch.Tensor:
        matrix = torch.zeros(n_positions, n_positions + 1, dtype=PROB_DTYPE)
        last_row = self.exam_table[-1]
        for t in range(n_positions):
            for j in range(-1, t):
                if t < len(self.exam_table):
                    matrix[t, j + 1] = self.exam_table[t][t - j - 1]
                elif j == -1:
                    matrix[t, 0] = last_row[-1]
                else:
                    matrix[t, j + 1] = last_row[min(t - j - 1, last_row.numel() - 2)]
        return matrix

    def click_probabilities(self, labels, mask):
        # Forward pass over the distribution of the previous click's rank.
        relevance = self.relevance(labels, mask)
        batch, n = labels.shape
        exam = self.examination_matrix(n).to(labels.device)
        state = torch.zeros(batch, n + 1, dtype=PROB_DTYPE, device=labels.device)
        state[:, 0] = 1.0
        marginals = []
        for t in range(n):
            click_mass = state * exam[t] * relevance[:, t : t + 1]
            marginal = click_mass.sum(dim=1)
            state = state - click_mass
            state[:, t + 1] += marginal
            marginals.append(marginal)
        return torch.stack(marginals, dim=1)

    def _walk(self, labels, mask, clicks_or_generator):
        """Step through the positions; sample when given a generator, else
        follow the given clicks.  Returns (clicks, exam_p, click_p, log_prob [B, N])."""
        relevance = self.relevance(labels, mask)
        batch, n = labels.shape
        exam_matrix = self.examination_matrix(n).to(labels.device)
        previous = torch.zeros(batch, dtype=torch.long, device=labels.device)  # column index j+1
        clicks, exams, log_probs = [], [], []
        for t in range(n):
            exam = exam_matrix[t, previous] * mask[:, t]
            p = exam * relevance[:, t]
            if isinstance(clicks_or_generator, torch.Generator):
                click = torch.rand(batch, generator=clicks_or_generator, dtype=PROB_DTYPE, device=labels.device) < p
            else:
                click = clicks_or_generator[:, t] > 0
            log_probs.append(torch.where(click, torch.log(p), torch.log1p(-p)))
            previous = torch.where(click, t + 1, previous)
            clicks.append(click)
            exams.append(exam)
        return (
            torch.stack(clicks, dim=1).to(labels.dtype),
            torch.stack(exams, dim=1),
            relevance,
            torch.stack(log_probs, dim=1),
        )

    def sample_with_probabilities(self, labels, mask, generator):
        clicks, exam, click_p, _ = self._walk(labels, mask, generator)
        return clicks, exam, click_p

    def log_likelihood(self, labels, clicks, mask):
        # Padded slots have p = 0: a click there gives log(0) = -inf.
        return self._walk(labels, mask, clicks)[3].sum(dim=1)

    def describe(self) -> Dict[str, Any]:
        return {
            "model_name": self.name,
            "eta": self.eta,
            "click_prob": self.click_prob.tolist(),
            "exam_prob": [row.tolist() for row in self.exam_table],
        }

    @classmethod
    def from_description(cls, desc):
        check_description_keys(desc, ["click_prob", "exam_prob"], ["eta"], cls.name)
        return cls(desc["click_prob"], desc["exam_prob"], desc.get("eta", 1.0))

    def with_eta(self, eta: float) -> "UserBrowsingModel":
        power = self._eta_power(eta)
        return UserBrowsingModel(self.click_prob, [(row ** power).tolist() for row in self.exam_table], eta)


#: Pure models by their description's ``model_name``.
CLICK_MODEL_CLASSES = {
    cls.name: cls for cls in (PositionBasedModel, CascadeModel, UserBrowsingModel, DependentClickModel)
}


def click_model_from_description(desc: Mapping[str, Any]) -> ClickModel:
    """Build a pure click model from a JSON dict whose ``model_name`` is one
    of :data:`CLICK_MODEL_CLASSES`.

    Raises:
        ValueError: unknown ``model_name`` (listing the known ones) or bad keys.
    """
    name = desc.get("model_name")
    if name not in CLICK_MODEL_CLASSES:
        raise ValueError(
            "unknown click model_name %r; available: %s" % (name, ", ".join(sorted(CLICK_MODEL_CLASSES)))
        )
    return CLICK_MODEL_CLASSES[name].from_description(desc)
