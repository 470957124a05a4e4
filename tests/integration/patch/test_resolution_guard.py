"""patch/resolution_guard.py: a launch that asks for an inactive plugin stops in the launcher with the
reason; every other launch resolves as before."""

import pytest

from sglang_eagle3_embed import MODEL_IMPL
from tests.integration.conftest import plugin_report

pytestmark = pytest.mark.releases


def test_healthy_plugin_lets_every_launch_resolve(healthy_plugin):
    assert all("ok" in v for v in healthy_plugin["launch"].values()), healthy_plugin["launch"]


@pytest.mark.parametrize(
    ("mode", "fragment"),
    [
        (
            "old-sglang",
            "supports SGLang 0.5.21, 0.5.22, 0.5.23 (sglang>=0.5.21,<=0.5.23), but sglang 0.5.20 is installed",
        ),
        ("arch-hook-not-applied", "SGLang did not apply the plugin's hook"),
    ],
)
def test_broken_plugin_stops_only_launches_that_ask_for_it(mode, fragment):
    launch = plugin_report(mode)["launch"]
    assert launch[MODEL_IMPL]["error"] == "PluginInactiveError"
    assert fragment in launch[MODEL_IMPL]["message"]
    assert "ok" in launch["sglang"] and "ok" in launch["auto"]
