"""ultra_multr.experiments.runner.seeded_main: main.py run as __main__ with a seed; settings files that are
not JSON are named by every entry point that reads one."""
import json
import re
import sys

import pytest
from conftest import require_ultra

from ultra_multr.experiments.runner.cli import ConfigError, load_config


def test_seeded_main_runs_script_as_main_with_seed(tmp_path):
    require_ultra()
    from ultra_multr.experiments.runner.seeded_main import main as seeded_main

    script = tmp_path / "main.py"
    out = tmp_path / "out.json"
    script.write_text(
        "import json, random, sys\n"
        "if __name__ == '__main__':\n"
        "    json.dump([sys.argv[1:], random.random()], open(%r, 'w'))\n" % str(out)
    )
    saved = list(sys.argv), list(sys.path)
    try:
        seeded_main(["--seed", "4", str(script), "--flag", "x"])
        first = json.loads(out.read_text())
        seeded_main(["--seed", "4", str(script), "--flag", "x"])
        assert json.loads(out.read_text()) == first
    finally:
        sys.argv[:], sys.path[:] = saved
    assert first[0] == ["--flag", "x"]


def test_settings_files_that_are_not_json_fail_naming_the_file(tmp_path):
    from ultra_multr.experiments.evaluate import main as evaluate_main
    from ultra_multr.experiments.runner.seeded_main import main as seeded_main

    bad = tmp_path / "settings.json"
    bad.write_text('{"learning_algorithm": "ultra_multr.DLA",\n "x": }\n')
    with pytest.raises(ConfigError, match=r"experiment config %s is not valid JSON: line 2 column" % re.escape(str(bad))):
        load_config(str(bad))
    script = tmp_path / "main.py"
    script.write_text("raise AssertionError('main.py must not start')\n")
    with pytest.raises(SystemExit, match=r"settings file %s is not valid JSON: line 2" % re.escape(str(bad))):
        seeded_main(["--seed", "0", str(script), "--setting_file", str(bad)])
    with pytest.raises(SystemExit, match=r"settings file %s is not valid JSON" % re.escape(str(bad))):
        evaluate_main(["--data_dir", str(tmp_path), "--setting_file", str(bad), "--model_dir", "m", "--out", "o"])
