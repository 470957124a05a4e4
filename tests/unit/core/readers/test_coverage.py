"""core.coverage: the layers a checkpoint's weights hold against the layers its config builds. Pure."""

from sglang_eagle3_embed.core.readers.coverage import draft_layers, target_coverage
from sglang_eagle3_embed.core.readers.model_folder import describe_layers

LAYER = frozenset({"self_attn", "mlp"})
MTP = frozenset({"eh_proj", "enorm", "hnorm", "self_attn", "mlp"})


def layers(*indices, mtp=()):
    return {**{i: LAYER for i in indices}, **{i: MTP for i in mtp}}


def test_every_layer_held_is_ok():
    found = target_coverage({"num_hidden_layers": 4}, layers(0, 1, 2, 3))
    assert found.ok and found.plain == 4


def test_missing_and_extra_layers():
    assert target_coverage({"num_hidden_layers": 4}, layers(0, 1)).missing == (range(2, 4),)
    assert target_coverage({"num_hidden_layers": 4}, layers(0, 2, 3)).missing == (range(1, 2),)
    assert target_coverage({"num_hidden_layers": 2}, layers(0, 1, 2, 3)).extra == (2, 3)


def test_an_mtp_layer_is_allowed_where_the_config_counts_one():
    assert target_coverage({"num_hidden_layers": 2, "num_nextn_predict_layers": 1}, layers(0, 1, mtp=(2,))).ok
    found = target_coverage({"num_hidden_layers": 2}, layers(0, 1, mtp=(2,)))
    assert found.extra == (2,) and found.plain == 2


def test_no_layer_count_is_left_to_other_rules():
    assert target_coverage({}, layers(0)) is None
    assert target_coverage({"num_hidden_layers": True}, layers(0)) is None


def test_draft_layers_read_midlayer_as_layer_zero():
    assert draft_layers(["fc.weight", "midlayer.self_attn.q_proj.weight"]) == {0}
    assert draft_layers(["model.layers.0.mlp.up_proj.weight", "layers.1.mlp.up_proj.weight"]) == {0, 1}
    assert draft_layers(["fc.weight", "lm_head.weight", "layers.x.y"]) == frozenset()


def test_a_huge_layer_count_is_described_without_listing_its_layers():
    """A config may name any count: the missing layers are runs, never a list (a MemoryError did
    that for num_hidden_layers 10**20)."""
    found = target_coverage({"num_hidden_layers": 10**20}, layers(0, 1, 3))
    assert found.missing == (range(2, 3), range(4, 10**20))
    assert describe_layers(found.missing) == f"layers 2, 4-{10**20 - 1}"
    assert describe_layers([3, 1, 2, range(5, 7), 0]) == "layers 0-3, 5-6"
