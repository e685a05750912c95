"""ultra_multr.compat.runtime: main.py's flags as ULTRA's argparse reads them."""
import pytest
from conftest import require_ultra


def test_boolean_main_flags_with_false_values_are_refused():
    require_ultra()
    from ultra_multr.compat.runtime import check_main_flags

    check_main_flags(["main.py", "--test_only", "True"])
    check_main_flags(["main.py", "--data_dir", "x"])
    for argv in (["main.py", "--test_only", "False"], ["main.py", "--test_while_train=0"]):
        with pytest.raises(ValueError, match="type=bool"):
            check_main_flags(argv)
