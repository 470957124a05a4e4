"""Loaded by every child process of the CPU suite (this folder is on their ``PYTHONPATH``): SGLang's
functions report the test they run for (``tests/support/sglang_touch.py``)."""

import importlib.util
import os
import sys

if os.environ.get("EAGLE3_EMBED_SGLANG_TOUCH_DIR"):
    _name = "tests.support.sglang_touch"  # the pytest process's name for it: one copy per process
    _spec = importlib.util.spec_from_file_location(
        _name, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sglang_touch.py")
    )
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_name] = _module
    _spec.loader.exec_module(_module)
    _module.install()
