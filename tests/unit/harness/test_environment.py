"""A measured run's environment (``harness.environment``): date, machine and
versions, the GPU only when one was asked for and is there, and a package that cannot be imported
reported as None rather than failing the run."""

import builtins
import datetime

from harness.environment import environment


def test_the_environment_names_the_date_the_machine_and_the_versions(monkeypatch):
    real = builtins.__import__

    def without_sglang(name, *args, **kwargs):  # a GPU result rendered on a bare machine
        if name == "sglang":
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_sglang)
    env = environment("cpu")
    assert env["date"] == datetime.date.today().isoformat() and env["cpu_cores"] >= 1
    assert env["sglang"] is None and env["sglang_eagle3_embed"] == "0.1.0" and env["torch"]
    assert "gpu" not in env
