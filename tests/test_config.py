"""ultra_multr.config: typed hyper-parameter parsing (ULTRA's compatibility layer: tests/compat/)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Tuple

import pytest

from ultra_multr.config import HParamError, format_hparams, parse_hparams, require


@dataclass(frozen=True)
class Example:
    rate: float = 0.1
    steps: int = 3
    flag: bool = False
    name: str = "a"
    sizes: Tuple[int, ...] = field(default_factory=tuple)
    seed: Optional[int] = None

    def __post_init__(self):
        require(self.steps >= 0, "steps must be >= 0, got %d" % self.steps)


def test_parse_types_lists_and_round_trip():
    config = parse_hparams(Example, "rate=0.5, steps=7,flag=True,name=b,sizes=[512, 256],seed=4")
    assert config == Example(0.5, 7, True, "b", (512, 256), 4)
    assert parse_hparams(Example, format_hparams(config)) == config
    assert parse_hparams(Example, "") == Example()


@pytest.mark.parametrize(
    "text, message",
    [
        ("rte=1", "unknown hyper-parameter 'rte' \\(did you mean 'rate'\\?\\)"),
        ("steps=2,steps=3", "'steps' is set twice"),
        ("flag=maybe", "flag: expected true or false"),
        ("steps=-2", "steps must be >= 0, got -2"),
        ("rate", "not of the form name=value"),
    ],
)
def test_parse_errors_name_the_culprit(text, message):
    with pytest.raises(HParamError, match=message):
        parse_hparams(Example, text, source="my_settings.json")
