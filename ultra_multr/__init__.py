"""MULTR (Model-based Unbiased Learning to Rank, WSDM 2023) for ULTRA_pytorch.

Select the classes by dotted path in a ULTRA settings file, e.g.
``"learning_algorithm": "ultra_multr.MULTR"``.  Attributes are imported on
first use, so that ``import ultra_multr.compat.startup`` (run at interpreter
start, see setup.py) stays cheap and never imports torch or ULTRA.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: public name -> module that defines it
_EXPORTS = {
    "DLA": "ultra_multr.algorithms.dla",
    "IPW": "ultra_multr.algorithms.ipw",
    "MULTR_IPW": "ultra_multr.algorithms.multr_ipw",
    "Naive": "ultra_multr.algorithms.naive",
    "PAL": "ultra_multr.algorithms.pal",
    "PairD": "ultra_multr.algorithms.paird",
    "REM": "ultra_multr.algorithms.rem",
    "MULTR": "ultra_multr.algorithms.multr",
    "MULTRConfig": "ultra_multr.algorithms.multr",
    "ContextAwareUserSimulator": "ultra_multr.simulator",
    "SimulatorConfig": "ultra_multr.simulator",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError("module 'ultra_multr' has no attribute %r" % name)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
