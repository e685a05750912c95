"""ultra_multr.compat.startup: the start-up hook that lets ULTRA import without TensorFlow."""
import subprocess
import sys

import pytest
from conftest import require_ultra


@pytest.mark.slow
def test_startup_hook_lets_ultra_import_without_tensorflow_and_removes_the_placeholder():
    require_ultra()
    code = (
        "import sys, ultra; "
        "from torch.utils.tensorboard import SummaryWriter; "
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"
