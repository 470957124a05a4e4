"""Loaded by every child process of the CPU suite (this folder is on their ``PYTHONPATH``): SGLang's
functions report the test they run for (``tests/support/sglang_touch.py``). A ``sitecustomize``
this one shadows (later on ``sys.path``, such as the GPU bundle's stubs) runs after it, as it would
have without this folder."""

import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))

if os.environ.get("EAGLE3_EMBED_SGLANG_TOUCH_DIR"):
    _name = "tests.support.sglang_touch"  # the pytest process's name for it: one copy per process
    _spec = importlib.util.spec_from_file_location(
        _name, os.path.join(os.path.dirname(_here), "sglang_touch.py")
    )
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_name] = _module
    _spec.loader.exec_module(_module)
    _module.install()

for _entry in sys.path:
    _path = os.path.join(os.path.abspath(_entry or "."), "sitecustomize.py")
    if os.path.dirname(_path) != _here and os.path.isfile(_path):
        _spec = importlib.util.spec_from_file_location("_sitecustomize_shadowed", _path)
        _shadowed = importlib.util.module_from_spec(_spec)
        sys.modules["_sitecustomize_shadowed"] = _shadowed
        _spec.loader.exec_module(_shadowed)
        break
