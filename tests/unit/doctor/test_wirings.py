"""Candidate wirings: the plugin's and stock SGLang's readings first, neighbours after, no duplicates."""

from hypothesis import given
from hypothesis import strategies as st

from sglang_eagle3_embed.core.canary.expectations import KINDS
from sglang_eagle3_embed.core.capture.draft_config import read_draft_ids
from sglang_eagle3_embed.doctor.wirings import PLUGIN, STOCK, candidate_wirings

IDS = "eagle_aux_hidden_state_layer_ids"


def by_name(wirings):
    return {name: w for w in wirings for name in w.names}


def test_nested_embedding_ids():
    w = by_name(candidate_wirings({"eagle_config": {IDS: [-1, 2, 4]}}, 7))
    assert w[PLUGIN].indices == (0, 3, 5)
    assert w[STOCK].indices is None and "captured 2 of 3" in w[STOCK].failure
    assert w["SGLang's default layers"].indices == (2, 3, 4)
    assert w["layers off by one (earlier)"].indices == (0, 2, 4)
    assert w["layer 0's output for the embedding"].indices == (1, 3, 5)
    assert w["embedding dropped, layers shifted left"].indices == (3, 5, 6)
    assert w[PLUGIN].kinds[0] == "plugin" and w["layers off by one (earlier)"].kinds == ("convention",)


def test_top_level_ids_stock_serves_defaults():
    w = by_name(candidate_wirings({IDS: [-1, 2, 4]}, 7))
    assert w[STOCK].indices == (2, 3, 4) and w[STOCK] is w["SGLang's default layers"]
    assert w[STOCK].name == "stock SGLang = SGLang's default layers"
    assert w[STOCK].kinds == ("stock", "defaults")


def test_declared_hidden_states_without_embedding():
    config = {
        "eagle_config": {IDS: [1, 3, 5], "eagle_aux_hidden_state_layer_ids_convention": "hidden_states"}
    }
    w = by_name(candidate_wirings(config, 7))
    assert w[PLUGIN].indices == (1, 3, 5)
    assert w[STOCK].indices == (2, 4, 6)  # first-id heuristic: +1 because the first id is 1
    assert w["ids as layer outputs"] is w[STOCK]


def test_reordered_ids_offer_ascending_packing():
    w = by_name(candidate_wirings({"eagle_config": {IDS: [4, -1, 2]}}, 7))
    assert w[PLUGIN].indices == (5, 0, 3)
    assert w["packed in ascending order"].indices == (0, 3, 5)


def test_plugin_refusal_is_a_failed_wiring():
    w = by_name(candidate_wirings({"eagle_config": {IDS: [-1, 2, 9]}}, 7))
    assert w[PLUGIN].indices is None and "out-of-range" in w[PLUGIN].failure


@given(
    ids=st.lists(st.integers(-1, 5), min_size=1, max_size=4, unique=True),
    top=st.booleans(),
    layers=st.integers(6, 12),
)
def test_candidates_are_distinct_and_valid(ids, top, layers):
    config = {IDS: ids} if top else {"eagle_config": {IDS: ids}}
    wirings = candidate_wirings(config, layers)
    width = read_draft_ids(config).draft_num_aux  # top-level ids leave SGLang's draft at 3 inputs
    assert wirings[0].names[0] == PLUGIN
    served = [w.indices for w in wirings if w.indices is not None]
    assert len(served) == len(set(served))
    for indices in served:
        assert len(indices) == width and len(set(indices)) == len(indices)
        assert all(0 <= i < layers for i in indices)
    names = [n for w in wirings for n in w.names]
    assert len(names) == len(set(names)) and STOCK in names
    for w in wirings:  # the canary's hint reads the kinds, never the names
        assert len(w.kinds) == len(w.names) and set(w.kinds) <= set(KINDS)
