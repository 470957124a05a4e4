"""Property tests of the pure id conventions (sglang_eagle3_embed.core.capture.ids)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sglang_eagle3_embed.core.capture.ids import (
    Convention,
    capture_index_to_id,
    describe_capture_index,
    describe_capture_indices,
    id_range,
    id_to_capture_index,
    parse_convention,
    stock_capture_indices,
    validate_ids,
)
from sglang_eagle3_embed.core.errors import DraftConfigError

DECLARED = st.sampled_from([Convention.LAYER_OUTPUT, Convention.HIDDEN_STATES])


@given(st.integers(min_value=-1, max_value=10_000), DECLARED)
def test_round_trip(layer_id, convention):
    index = id_to_capture_index(layer_id, convention)
    assert capture_index_to_id(index, convention) == layer_id


@given(st.integers(min_value=-1, max_value=10_000))
def test_conventions_name_the_same_tensor(k):
    """Output-of-layer id k and HF hidden_states index k+1 are one tensor."""
    assert id_to_capture_index(k, Convention.LAYER_OUTPUT) == id_to_capture_index(
        k + 1, Convention.HIDDEN_STATES
    )


def test_minus_one_is_the_embedding_output():
    assert id_to_capture_index(-1, Convention.LAYER_OUTPUT) == 0
    assert describe_capture_index(0) == "embedding output"
    assert describe_capture_indices([0, 3, 31]) == "embedding output, output of layer 2, output of layer 30"


@given(st.integers(min_value=1, max_value=200), DECLARED)
def test_range_is_exactly_the_capturable_indices(num_layers, convention):
    lo, hi = id_range(convention, num_layers)
    indices = [id_to_capture_index(i, convention) for i in range(lo, hi + 1)]
    assert indices == list(range(num_layers))


@given(st.lists(st.integers(min_value=-5, max_value=100), min_size=1, max_size=6), st.integers(4, 100))
def test_stock_heuristic_shifts_only_when_first_id_is_one(ids, num_layers):
    got = stock_capture_indices(ids, num_layers)
    assert got == ([i + 1 for i in ids] if ids[0] == 1 else ids)


@given(st.integers(min_value=1, max_value=200))
def test_stock_default(num_layers):
    assert stock_capture_indices(None, num_layers) == [2, num_layers // 2, num_layers - 3]


@given(st.lists(st.integers(-1, 60), min_size=1, max_size=8, unique=True))
def test_validate_accepts_distinct_ints_and_keeps_order(ids):
    assert validate_ids(ids, where="") == tuple(ids)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("2,30", "must be a list"),
        (None, "must be a list"),
        ([], "is empty"),
        ([-1, 2.0], "non-integer"),
        ([-1, True], "non-integer"),
        ([-1, "2"], "non-integer"),
        ([-1, 2, 2], "repeats [2]"),
    ],
)
def test_validate_rejects_with_a_fix(value, fragment):
    with pytest.raises(DraftConfigError) as err:
        validate_ids(value, where="eagle_config.")
    assert fragment in str(err.value)
    assert "eagle_config.eagle_aux_hidden_state_layer_ids" in str(err.value)


@pytest.mark.parametrize("value", ["layer_output", "hidden_states"])
def test_parse_convention(value):
    assert parse_convention(value, where="").value == value


@pytest.mark.parametrize("value", ["sglang_stock", "output", 1, None, "LAYER_OUTPUT"])
def test_parse_convention_rejects_with_allowed_values(value):
    with pytest.raises(DraftConfigError, match="'layer_output', 'hidden_states'"):
        parse_convention(value, where="")
