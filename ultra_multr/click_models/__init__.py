"""Click models: the probabilistic models (pure torch, :mod:`.models`, re-exported here), their ULTRA adapters
(:mod:`.ultra`, the ``click_model_json`` files ULTRA's feeds read) and the click-model evaluation
(:mod:`.evaluation`: fitting and scoring models, our simulator among them, on held-out sessions).

Only :mod:`.models` is imported here: it is on the ground floor, the other two sit above the simulator.
"""
from ultra_multr.click_models.models import (
    CLICK_MODEL_CLASSES,
    CascadeModel,
    ClickModel,
    DependentClickModel,
    LabelRangeError,
    PositionBasedModel,
    UserBrowsingModel,
    check_description_keys,
    click_model_from_description,
    graded_click_prob,
    per_rank,
    reciprocal_rank_exam_prob,
)

__all__ = [
    "CLICK_MODEL_CLASSES",
    "CascadeModel",
    "ClickModel",
    "DependentClickModel",
    "LabelRangeError",
    "PositionBasedModel",
    "UserBrowsingModel",
    "check_description_keys",
    "click_model_from_description",
    "graded_click_prob",
    "per_rank",
    "reciprocal_rank_exam_prob",
]
