"""Input feeds for ULTRA's main.py: what a learning algorithm trains on.

* :mod:`.simulation`: clicks simulated on the fly by a click model (:class:`ClickSimulationFeed`, a drop-in for
  ULTRA's) or drawn from a fixed log of simulated sessions (:class:`ClickLogFeed`);
* :mod:`.session_replay`: logged sessions replayed in their logged order (the base of the next two);
* :mod:`.ultre`: ULTRA's ULTRE layout (``--click_model_dir``); :mod:`.baidu`: Baidu-ULTR click logs;
* :mod:`.arrays`: the per-query arrays, views and fingerprints every feed builds once per data set.

Settings files name a feed by dotted path; the two simulation feeds are re-exported here, so
``"train_input_feed": "ultra_multr.feeds.ClickSimulationFeed"`` works.
"""
from ultra_multr.feeds.simulation import ClickLogFeed, ClickSimulationFeed

__all__ = ["ClickLogFeed", "ClickSimulationFeed"]
