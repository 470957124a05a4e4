"""The hooks' own logic without SGLang: registration that retries what failed, the activation state
``plugin.register`` leaves, the guard's decisions, and how the guard learns that SGLang applied the
architecture hook (by calling the hooked function with a probe only the hook answers)."""

import sys
from types import ModuleType, SimpleNamespace

import pytest

from sglang_eagle3_embed import MODEL_IMPL, patch, plugin
from sglang_eagle3_embed.activation import State
from sglang_eagle3_embed.core.errors import PluginInactiveError
from sglang_eagle3_embed.patch import model_architecture, resolution_guard


class FakeHook:
    def __init__(self, what, failures=0):
        self.WHAT, self.failures, self.calls = what, failures, 0

    def register(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(f"{self.WHAT} refused")


@pytest.fixture
def hooks(monkeypatch):
    fakes = (FakeHook("guard"), FakeHook("validator", failures=1), FakeHook("architecture"))
    monkeypatch.setattr(patch, "HOOKS", fakes)
    monkeypatch.setattr(patch, "_registered", set())
    monkeypatch.setattr(State, "active", False)
    monkeypatch.setattr(State, "reason", "")
    monkeypatch.setattr(plugin, "installed_sglang_version", lambda: "0.5.23")
    return fakes


def test_a_failed_registration_is_not_recorded_and_is_retried_alone(hooks):
    guard, validator, architecture = hooks
    errors = patch.install()
    assert errors == ["registering the hook on validator failed: RuntimeError('validator refused')"]
    assert patch._registered == {"guard", "architecture"}
    assert patch.install() == []
    assert (guard.calls, validator.calls, architecture.calls) == (1, 2, 1)
    assert patch.install() == [] and validator.calls == 2  # nothing left to register


def test_register_stays_inactive_until_every_hook_is_registered(hooks):
    plugin.register()
    assert State.active is False and "validator refused" in State.reason
    plugin.register()  # SGLang runs the entry point again in every process; here the retry works
    assert State.active is True and State.reason == ""


def test_an_unsupported_sglang_leaves_the_plugin_inactive(hooks, monkeypatch):
    hooks[1].failures = 0
    monkeypatch.setattr(plugin, "installed_sglang_version", lambda: "0.5.20")
    plugin.register()
    assert State.active is False and "0.5.20" in State.reason


@pytest.fixture
def hooked_module(monkeypatch):
    """A stand-in for sglang.srt.model_loader.utils whose function the test may wrap."""
    module = ModuleType("fake_loader_utils")

    def original(model_config):
        return model_config.hf_config.architectures, "arch"  # fails on the probe, like SGLang's

    module.get_model_architecture = original
    monkeypatch.setitem(sys.modules, "fake_loader_utils", module)
    monkeypatch.setattr(model_architecture, "TARGET", "fake_loader_utils.get_model_architecture")
    return module, original


def test_applied_is_true_only_when_the_hook_wraps_the_function(hooked_module):
    module, original = hooked_module
    assert model_architecture.applied() is False
    module.get_model_architecture = lambda *a, **k: model_architecture.around(original, *a, **k)
    assert model_architecture.applied() is True
    config = SimpleNamespace(hf_config=SimpleNamespace(architectures=["X"]), model_impl="sglang")
    assert module.get_model_architecture(config) == (["X"], "arch")  # other launches: untouched


def launch(impl):
    return SimpleNamespace(model_impl=impl)


def test_the_guard_stops_only_launches_that_ask_for_an_unusable_plugin(hooked_module, monkeypatch):
    module, original = hooked_module
    ran = []
    monkeypatch.setattr(State, "active", False)
    monkeypatch.setattr(State, "reason", "it was never registered")
    resolution_guard.guard(launch("sglang"), ran.append)
    with pytest.raises(PluginInactiveError, match="never registered"):
        resolution_guard.guard(launch(MODEL_IMPL), ran.append)
    monkeypatch.setattr(State, "active", True)
    with pytest.raises(PluginInactiveError, match="did not apply the plugin's hook"):
        resolution_guard.guard(launch(MODEL_IMPL), ran.append)
    module.get_model_architecture = lambda *a, **k: model_architecture.around(original, *a, **k)
    resolution_guard.guard(launch(MODEL_IMPL), ran.append)
    assert [a.model_impl for a in ran] == ["sglang", MODEL_IMPL]
