"""The supported SGLang releases: each activates with what differs in it, any other is refused with
the supported range named, unless overridden, loudly. The package's dependency admits exactly them."""

import pytest
import tomllib
from packaging.requirements import Requirement

from sglang_eagle3_embed.core.errors import PluginInactiveError
from sglang_eagle3_embed.core.releases import (
    OVERRIDE_ENV,
    RELEASES,
    SUPPORTED,
    current,
    installed_sglang_version,
    release,
)
from tests.support import ROOT


@pytest.mark.parametrize("version", SUPPORTED)
def test_every_supported_release_activates_without_a_warning(version):
    found, warning = release(version, environ={})
    assert found.version == version and warning is None


def test_what_differs_between_releases():
    assert [RELEASES[v].first_step for v in SUPPORTED] == [
        "handle_mega_moe",
        "handle_deprecated_dp_attention",
        "handle_deprecated_dp_attention",
    ]
    assert [RELEASES[v].capture_only for v in SUPPORTED] == [False, False, True]


def test_the_installed_release_is_supported():
    assert installed_sglang_version() in SUPPORTED


@pytest.mark.parametrize("installed", ["0.5.20", "0.5.24", "0.6.0", None])
def test_other_versions_are_refused_naming_the_range(installed):
    with pytest.raises(PluginInactiveError) as err:
        release(installed, environ={})
    message = str(err.value)
    assert "0.5.21, 0.5.22, 0.5.23" in message and "sglang>=0.5.21" in message
    assert (installed or "no sglang") in message and OVERRIDE_ENV in message


@pytest.mark.parametrize("installed", ["0.5.20", "0.5.24", "0.6.0"])
def test_what_differs_is_the_newest_releases_on_any_other_version(installed):
    assert [current(v) for v in SUPPORTED] == [RELEASES[v] for v in SUPPORTED]
    assert current(installed) == RELEASES[SUPPORTED[-1]]


def test_override_activates_as_the_newest_release_with_a_warning():
    found, warning = release("0.5.99", environ={OVERRIDE_ENV: "1"})
    assert found.version == SUPPORTED[-1] and "0.5.99" in warning and "untested" not in warning


def test_the_dependency_admits_exactly_the_supported_releases():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (sglang,) = [Requirement(r) for r in project["dependencies"] if r.startswith("sglang")]
    for version in ("0.5.20", *SUPPORTED, "0.5.24"):
        assert sglang.specifier.contains(version) == (version in SUPPORTED), version
