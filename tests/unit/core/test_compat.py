"""The plugin refuses any SGLang other than 0.5.23 unless overridden, loudly."""

import pytest

from sglang_eagle3_embed import SUPPORTED_SGLANG_VERSION
from sglang_eagle3_embed.core.compat import OVERRIDE_ENV, check_sglang_version, installed_sglang_version
from sglang_eagle3_embed.core.errors import PluginInactiveError


def test_supported_version_passes():
    assert check_sglang_version(SUPPORTED_SGLANG_VERSION, environ={}) is None


def test_installed_version_is_the_pinned_one():
    assert installed_sglang_version() == SUPPORTED_SGLANG_VERSION


@pytest.mark.parametrize("installed", ["0.5.22", "0.5.24", "0.6.0", None])
def test_other_versions_are_refused_naming_both(installed):
    with pytest.raises(PluginInactiveError) as err:
        check_sglang_version(installed, environ={})
    message = str(err.value)
    assert SUPPORTED_SGLANG_VERSION in message
    assert (installed or "no sglang") in message
    assert OVERRIDE_ENV in message


def test_override_activates_with_a_warning():
    warning = check_sglang_version("0.5.24", environ={OVERRIDE_ENV: "1"})
    assert "0.5.24" in warning and "untested" in warning
