"""The environment of a measured run (date, machine, versions), recorded beside its figures by the
GPU tests and the benchmarks."""

from __future__ import annotations

import datetime
import os
import platform


def environment(device: str = "cpu") -> dict:
    """Date, machine and versions of this run; the GPU's name when ``device`` is CUDA and one is
    there."""
    import torch

    env = {
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "machine": platform.machine(),
    }
    for package in ("sglang", "transformers", "sglang_eagle3_embed"):
        try:
            env[package] = __import__(package).__version__
        except Exception:  # reported, not required: a GPU result may be rendered on a bare machine
            env[package] = None
    if device.startswith("cuda") and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    return env
