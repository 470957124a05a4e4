"""The demo pair shipped as package data is what ``tools/demo_pair.py`` builds: the demo's spec finds
it, complete, its draft recording the shipped target's build; a build writes the same files; and
where this machine builds as the shipping one did (torch version, CPU capability; one training
thread either way) every byte is the same. The build is the session's ``tiny_pair``
(``PairSpec()``, trained by the same ``build_pair``), exported as the script exports it, so nothing
is trained twice."""

import json

import pytest

from sglang_eagle3_embed.doctor.cache import MANIFEST, manifest_digest, verify
from sglang_eagle3_embed.doctor.pair import SHIPPED, TRAINED_ON, PairSpec, shipped_pair
from tools.demo_pair import BUILT_WITH, build_environment, differences, export

FIX = "rebuild it: python -m tools.demo_pair"


@pytest.fixture(scope="module")
def rebuilt(tiny_pair, tmp_path_factory):
    out = tmp_path_factory.mktemp("demo-pair")
    export(out, cache_dir=tiny_pair.target.parent)
    return out


def files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_the_demo_spec_finds_the_shipped_pair_complete():
    pair = shipped_pair(PairSpec())
    assert pair is not None, f"{SHIPPED} holds no complete pair for PairSpec(): {FIX}"
    assert pair.target.parent == SHIPPED
    assert [verify(folder) for folder in (pair.target, pair.draft)] == [None, None]


def test_the_shipped_draft_records_the_shipped_target():
    pair = shipped_pair(PairSpec())
    assert pair is not None, FIX
    record = json.loads((pair.draft / TRAINED_ON).read_text())
    assert record == {"folder": pair.target.name, "manifest_sha256": manifest_digest(pair.target)}, FIX


def test_the_shipped_pair_has_the_files_and_configs_of_a_build(rebuilt):
    assert files(SHIPPED) == files(rebuilt), FIX
    for name in files(rebuilt):
        if name.endswith(".json") and not name.endswith((MANIFEST, BUILT_WITH, TRAINED_ON)):
            assert (SHIPPED / name).read_bytes() == (rebuilt / name).read_bytes(), f"{name}: {FIX}"
    for folder in (p for p in rebuilt.iterdir() if p.is_dir()):
        built = json.loads((folder / MANIFEST).read_text())
        shipped = json.loads((SHIPPED / folder.name / MANIFEST).read_text())
        assert {k: v["size"] for k, v in shipped.items()} == {k: v["size"] for k, v in built.items()}


def test_the_shipped_pair_is_byte_for_byte_a_fresh_build(rebuilt):
    shipped_with = json.loads((SHIPPED / BUILT_WITH).read_text())
    if shipped_with != build_environment():
        pytest.skip(
            f"shipped from {shipped_with}, this machine is {build_environment()}: float rounding differs"
        )
    assert differences(SHIPPED, rebuilt) == [], FIX
