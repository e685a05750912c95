"""Parts an algorithm owns, between the feeds and the algorithms: MULTR's pieces, usable by any algorithm.

* :mod:`.sessions`: main.py's training click stream (:class:`~.sessions.TrainingClicks`) and the one adapter
  ULTRA's feeds read instead of the algorithm (:class:`~.sessions.FeedHost`);
* :mod:`.simulator_phase`: the user simulator from the click log to a frozen
  :class:`~ultra_multr.simulator.UserSimulator` (:class:`~.simulator_phase.SimulatorPhase`, its knobs
  :class:`~.simulator_phase.SimulatorSettings`);
* :mod:`.guards`: the guards' knobs and the logger guard;
* :mod:`.doubly_robust`: Eq. dr_loss on a frozen simulator for an IPW host (:class:`~.doubly_robust.DoublyRobust`,
  its knobs :class:`~.doubly_robust.DoublyRobustSettings`);
* :mod:`.pilot`: the validation pilot that chooses a knob before the first update.
"""
