"""``python -m ultra_multr.experiments.runner CONFIG.json``: the runner's command line (:mod:`.cli`)."""
import sys

from ultra_multr.experiments.runner.cli import main

sys.exit(main())
