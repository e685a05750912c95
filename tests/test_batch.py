"""ultra_multr.batch: a batch from ULTRA's input feed."""
import numpy as np
import torch
from conftest import require_ultra


def test_batch_from_input_feed_casts_ids_and_masks_padding():
    require_ultra()
    from ultra_multr.batch import batch_from_input_feed

    feed = {
        "letor_features": np.arange(6, dtype=np.float32).reshape(3, 2),
        "docid_input0": np.array([0, 2], dtype=np.float32),
        "docid_input1": np.array([1, 3], dtype=np.float32),  # 3 == number of docs: padding
        "label0": np.array([1, 0], dtype=np.float32),
        "label1": np.array([0, 1], dtype=np.float32),
    }
    batch = batch_from_input_feed(feed, ["docid_input0", "docid_input1"], ["label0", "label1"], torch.device("cpu"))
    assert batch.mask.tolist() == [[True, True], [True, False]]
    assert batch.features[1, 0].tolist() == [4.0, 5.0]
    assert batch.features[1, 1].tolist() == [0.0, 0.0]
    assert batch.labels.tolist() == [[1.0, 0.0], [0.0, 0.0]]  # no click on padding
