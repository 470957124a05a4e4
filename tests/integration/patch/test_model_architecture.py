"""patch/model_architecture.py: the AROUND hook on ``get_model_architecture`` gives the plugin's
classes to targets launched with ``--model-impl sglang_eagle3_embed`` and nothing else changes."""

import pytest

from sglang_eagle3_embed import FAMILY, MODEL_IMPL
from tests.integration.conftest import plugin_report

pytestmark = pytest.mark.releases


def test_the_hook_is_applied_where_modules_imported_the_function(healthy_plugin):
    assert healthy_plugin["arch_hook_applied"] is True
    assert healthy_plugin["module_level_name_rebound"] is True  # `from ... import get_model_architecture`


def test_model_impl_selects_plugin_classes_only_for_targets(healthy_plugin):
    resolve = healthy_plugin["resolve"]
    for arch in FAMILY:
        assert resolve[f"{MODEL_IMPL}/{arch}"]["ok"] == f"sglang_eagle3_embed.patch.deepseek_models.{arch}"
        for impl in ("sglang", "auto", "transformers_typo"):
            assert resolve[f"{impl}/{arch}"]["ok"].startswith("sglang.srt.models."), (impl, arch)
    draft = resolve["draft/DeepseekV3ForCausalLM"]["ok"]
    assert draft == "sglang.srt.models.deepseek_v2.DeepseekV3ForCausalLM"
    assert resolve[f"{MODEL_IMPL}/LlamaForCausalLM"]["error"] == "UnsupportedModeError"


def test_without_the_guard_the_model_load_still_fails_closed():
    report = plugin_report("guard-not-registered")
    assert report["active"] is False
    failure = report["resolve"][f"{MODEL_IMPL}/DeepseekV3ForCausalLM"]
    assert failure["error"] == "PluginInactiveError" and "no_such_step" in failure["message"]
    assert report["resolve"]["sglang/DeepseekV3ForCausalLM"]["ok"].startswith("sglang.srt.models.")


def test_a_hook_sglang_could_not_apply_is_detected():
    assert plugin_report("arch-hook-not-applied")["arch_hook_applied"] is False
