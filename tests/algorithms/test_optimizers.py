"""The ranker's optimizers (grad_strategy): AdamW as ultr-reproducibility trains with it (optax.adamw's defaults)."""
from __future__ import annotations

import pytest
import torch

from conftest import require_ultra

require_ultra()

from ultra_multr.algorithms.base import AlgorithmConfig, Optimizers  # noqa: E402
from ultra_multr.config import HParamError, identity, parse_hparams  # noqa: E402


def test_adamw_takes_one_step_as_the_formula_says():
    """First AdamW step: decoupled decay p (1 - lr wd), then lr m / (sqrt(v) + eps) with both moments bias-corrected,
    i.e. lr g / (|g| + eps); wd = 1e-4 (optax.adamw's default, which ultr-reproducibility keeps)."""
    start = torch.tensor([0.5, -2.0, 3.0])
    weights = torch.nn.Parameter(start.clone())
    optimizers = Optimizers([([weights], 0.01)], "adamw", max_gradient_norm=0.0)
    gradient = torch.tensor([0.2, -1.0, 0.0])
    optimizers.step((weights * gradient).sum())
    expected = start * (1 - 0.01 * 1e-4) - 0.01 * gradient / (gradient.abs() + 1e-8)
    assert weights.detach().tolist() == pytest.approx(expected.tolist(), rel=1e-6, abs=1e-9)


def test_adamw_is_a_choice_and_the_default_keeps_the_identity():
    assert parse_hparams(AlgorithmConfig, "grad_strategy=adamw,learning_rate=0.0001").grad_strategy == "adamw"
    with pytest.raises(HParamError, match="grad_strategy must be one of"):
        parse_hparams(AlgorithmConfig, "grad_strategy=adam")
    assert identity(parse_hparams(AlgorithmConfig, ""), "run")["grad_strategy"] == "ada"
