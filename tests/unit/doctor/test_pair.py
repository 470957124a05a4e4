"""pair.write_config_variant: the same draft weights under another config layout."""

import json

import pytest

from sglang_eagle3_embed.core.capture.ids import CONVENTION_FIELD, IDS_FIELD
from sglang_eagle3_embed.doctor.pair import write_config_variant


@pytest.fixture
def draft(tmp_path):
    folder = tmp_path / "draft"
    folder.mkdir()
    config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "eagle_config": {IDS_FIELD: [-1, 4, 10], CONVENTION_FIELD: "layer_output"},
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def read(folder):
    return json.loads((folder / "config.json").read_text())


def test_top_level_moves_the_ids_and_links_the_weights(draft, tmp_path):
    out = write_config_variant(draft, tmp_path / "top", placement="top-level")
    config = read(out)
    assert config[IDS_FIELD] == [-1, 4, 10] and IDS_FIELD not in config["eagle_config"]
    assert config["eagle_config"][CONVENTION_FIELD] == "layer_output"
    assert (out / "model.safetensors").resolve() == (draft / "model.safetensors").resolve()
    back = read(write_config_variant(out, tmp_path / "nested", placement="nested"))
    assert back["eagle_config"][IDS_FIELD] == [-1, 4, 10] and IDS_FIELD not in back


def test_replaced_ids_drop_the_declared_convention(draft, tmp_path):
    config = read(write_config_variant(draft, tmp_path / "hand", placement="nested", ids=[0, 5, 11]))
    assert config["eagle_config"] == {IDS_FIELD: [0, 5, 11]}


def test_unknown_placement_is_refused(draft, tmp_path):
    with pytest.raises(ValueError, match="placement"):
        write_config_variant(draft, tmp_path / "x", placement="sideways")
