"""docs/upstream/sglang-eagle3-embed.patch applies to the installed SGLang 0.5.23, its
upstream-style tests pass against the patched copy, and its one conversion function captures what
the plugin captures (tools/upstream_patch.py does the applying)."""

import importlib.util
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle3_embed.core.draft_config import resolve_capture_plan
from sglang_eagle3_embed.core.errors import DraftConfigError
from sglang_eagle3_embed.core.ids import CONVENTION_FIELD, IDS_FIELD
from tools import upstream_patch


@pytest.fixture(scope="module")
def patched(tmp_path_factory):
    root = tmp_path_factory.mktemp("sglang-patched")
    upstream_patch.patched_tree(root)
    return root


@pytest.fixture(scope="module")
def upstream(patched):
    """The patched tree's eagle3_layer_ids module (pure Python), loaded by path."""
    path = patched / "python" / "sglang" / "srt" / "speculative" / "eagle3_layer_ids.py"
    spec = importlib.util.spec_from_file_location("upstream_eagle3_layer_ids", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_patch_touches_only_existing_files_and_leaves_the_install_alone(patched):
    import sglang

    installed = Path(sglang.__file__).resolve().parent
    for rel in upstream_patch.touched_files():
        copy = patched / rel
        assert not copy.is_symlink() and copy.exists(), rel
        original = installed / Path(rel).relative_to("python/sglang")
        assert original.read_text() != copy.read_text(), f"{rel}: the patch did not change it"
    assert "eagle3_capture_indices" not in (installed / "srt/models/deepseek_v2.py").read_text()


def test_upstream_style_tests_pass_against_the_patched_copy(patched):
    run = upstream_patch.run_upstream_tests(patched)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout


def _plugin(ids, num_layers, convention=None):
    eagle = {IDS_FIELD: ids, **({CONVENTION_FIELD: convention} if convention else {})}
    return list(resolve_capture_plan({"eagle_config": eagle}, num_layers).indices)


@settings(max_examples=300, deadline=None)
@given(
    num_layers=st.integers(4, 96),
    data=st.data(),
    convention=st.sampled_from([None, "layer_output", "hidden_states"]),
)
def test_upstream_conversion_agrees_with_the_plugin(upstream, num_layers, data, convention):
    """Ascending ids: the upstream function and the plugin capture the same tensors, or both
    refuse. (Non-ascending ids: the plugin reorders the blocks; the patch refuses them.)"""
    ids = sorted(data.draw(st.sets(st.integers(-3, num_layers + 1), min_size=1, max_size=3)))
    try:
        expected = _plugin(ids, num_layers, convention)
    except DraftConfigError:
        expected = None
    try:
        got = upstream.eagle3_capture_indices(
            ids, num_layers, convention=convention, undeclared=upstream.FIRST_ID_HEURISTIC
        )
    except ValueError:
        got = None
    assert got == expected, (ids, num_layers, convention)


def test_non_ascending_ids_reordered_by_the_plugin_refused_by_the_patch(upstream):
    assert _plugin([4, -1, 2], 8) == [5, 0, 3]
    with pytest.raises(ValueError, match="ascending"):
        upstream.eagle3_capture_indices([4, -1, 2], 8)
