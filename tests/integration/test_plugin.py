"""The entry point: SGLang's own ``load_plugins()`` discovers and runs ``plugin.register`` in a fresh
process, which activates the plugin; an unsupported SGLang leaves it inactive with the reason."""

import pytest

from tests.integration.conftest import plugin_report

pytestmark = pytest.mark.releases


def test_entry_point_is_discovered_and_run_by_load_plugins(healthy_plugin):
    assert healthy_plugin["entry_points"]["eagle3_embed"] == "sglang_eagle3_embed.plugin:register"
    assert healthy_plugin["active"] is True and healthy_plugin["reason"] == ""
    assert "eagle3_embed_canary" in healthy_plugin["warmups"]  # the startup canary, opt-in by --warmups


def test_an_unsupported_sglang_leaves_the_plugin_inactive_with_the_reason():
    report = plugin_report("old-sglang")
    assert report["active"] is False
    assert report["reason"].startswith("sglang_eagle3_embed "), report["reason"]  # not a hook's failure
    assert (
        "supports SGLang 0.5.21, 0.5.22, 0.5.23 (sglang>=0.5.21,<=0.5.23), but sglang 0.5.20 is installed"
        in report["reason"]
    )
