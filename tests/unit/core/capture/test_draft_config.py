"""Property tests of draft-config reading and capture planning (pure core)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle3_embed.core.capture.conventions import default_of
from sglang_eagle3_embed.core.capture.draft_config import NESTED, CapturePlan, resolve_capture_plan
from sglang_eagle3_embed.core.capture.ids import CONVENTION_FIELD, IDS_FIELD, Convention
from sglang_eagle3_embed.core.capture.stock_sglang import stock_reading
from sglang_eagle3_embed.core.errors import DraftConfigError
from tests.support.strategies import draft_config, embed_ids, messy_draft_config

LAYERS = st.integers(min_value=2, max_value=96)


@given(st.data(), LAYERS)
def test_embedding_ids_map_to_output_of_layer_plus_one_in_config_order(data, num_layers):
    ids = data.draw(embed_ids(num_layers))
    declare = data.draw(st.sampled_from([None, "layer_output"]))
    plan = resolve_capture_plan(data.draw(draft_config(ids, declare)), num_layers)
    assert plan.convention is Convention.LAYER_OUTPUT
    assert list(plan.indices) == [i + 1 for i in ids]
    assert plan.warnings == ()
    # The ascending packing SGLang produces, reordered by block_order, is the draft's order.
    assert [plan.layers_to_capture[b] for b in plan.block_order] == list(plan.indices)
    assert plan.needs_reorder == (list(ids) != sorted(ids))


@given(st.data(), LAYERS)
def test_hidden_states_convention_uses_ids_as_indices(data, num_layers):
    ids = data.draw(st.lists(st.integers(0, num_layers - 1), min_size=1, max_size=4, unique=True))
    plan = resolve_capture_plan(data.draw(draft_config(ids, "hidden_states")), num_layers)
    assert list(plan.indices) == ids


@given(st.data(), LAYERS)
def test_undeclared_ids_without_minus_one_keep_stock_reading_and_warn(data, num_layers):
    ids = data.draw(st.lists(st.integers(0, num_layers - 2), min_size=1, max_size=4, unique=True))
    plan = resolve_capture_plan({"eagle_config": {IDS_FIELD: ids}}, num_layers)
    expected = [i + 1 for i in ids] if ids[0] == 1 else ids
    assert plan.convention is Convention.SGLANG_STOCK
    assert list(plan.indices) == expected
    if default_of(ids, NESTED, num_layers) is not None:  # a trainer's default, where it writes it
        assert plan.warnings == ()
        return
    assert [w.rule for w in plan.warnings] == ["draft-ids-undeclared"]
    assert CONVENTION_FIELD in plan.warnings[0].message


@given(LAYERS)
def test_missing_ids_capture_the_default_with_a_warning(num_layers):
    if len({2, num_layers // 2, num_layers - 3}) < 3 or num_layers - 3 < 0:
        with pytest.raises(DraftConfigError):
            resolve_capture_plan({}, num_layers)
        return
    plan = resolve_capture_plan({}, num_layers)
    assert list(plan.indices) == [2, num_layers // 2, num_layers - 3]
    assert [w.rule for w in plan.warnings] == ["draft-ids-missing"]
    assert "no eagle_aux_hidden_state_layer_ids" in plan.warnings[0].message


@given(st.data(), LAYERS, st.sampled_from(["layer_output", "hidden_states"]))
def test_out_of_range_ids_are_refused(data, num_layers, convention):
    lo, hi = (-1, num_layers - 2) if convention == "layer_output" else (0, num_layers - 1)
    bad = data.draw(st.one_of(st.integers(hi + 1, hi + 50), st.integers(-50, lo - 1)))
    ids = [lo, bad] if bad != lo else [bad]
    with pytest.raises(DraftConfigError) as err:
        resolve_capture_plan({"eagle_config": {IDS_FIELD: ids, CONVENTION_FIELD: convention}}, num_layers)
    assert f"{lo}..{hi}" in str(err.value) or "contains -1" in str(err.value)


def test_last_layer_output_is_refused_with_the_reason():
    with pytest.raises(DraftConfigError, match="output of the last layer has no capture point"):
        resolve_capture_plan({"eagle_config": {IDS_FIELD: [-1, 2, 60]}}, 61)


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"eagle_config": [-1, 2, 4]}, "eagle_config is [-1, 2, 4]; it must be an object"),
        ({"eagle_config": {IDS_FIELD: [-1, 2, 4]}, IDS_FIELD: [-1, 2, 5]}, "disagree"),
        (
            {"eagle_config": {CONVENTION_FIELD: "layer_output"}, CONVENTION_FIELD: "hidden_states"},
            "disagree",
        ),
        ({IDS_FIELD: [-1, 2, 4], CONVENTION_FIELD: "hidden_states"}, "contains -1"),
        (
            {"eagle_config": {IDS_FIELD: [-1, 2, 4], "use_aux_hidden_state": False}},
            "use_aux_hidden_state is false",
        ),
        ({"eagle_config": {IDS_FIELD: [-1, 2, 4], "use_aux_hidden_state": "yes"}}, "expected a JSON bool"),
        ({"eagle_config": {IDS_FIELD: [-1, 2, 4]}, "num_aux_hidden_states": 2}, "fc reads 2"),
        ({"eagle_config": {IDS_FIELD: [-1, 2, 4]}, "num_aux_hidden_states": 0}, "positive integer"),
        ({IDS_FIELD: [-1, 4]}, "fc reads 3"),  # top-level ids: llama_eagle3 sizes fc with the default 3
        ([1, 2], "must be a JSON object"),
    ],
)
def test_malformed_configs_get_an_actionable_error(config, fragment):
    with pytest.raises(DraftConfigError) as err:
        resolve_capture_plan(config, 8)
    assert fragment in str(err.value)


def oracle(config, num_layers):
    """An independent, literal reading of the documented rules: (indices, convention) or None."""
    if not isinstance(config, dict):
        return None
    nested = config.get("eagle_config")
    if nested is not None and not isinstance(nested, dict):
        return None
    nested = nested or {}

    def ids_at(m):
        v = m.get(IDS_FIELD)
        if v is None:
            return "absent"
        ok = isinstance(v, list) and v and all(type(x) is int for x in v) and len(set(v)) == len(v)
        return v if ok else None

    got = [ids_at(nested), ids_at(config)]
    if None in got:
        return None
    present = [g for g in got if g != "absent"]
    if len(present) == 2 and present[0] != present[1]:
        return None
    ids = present[0] if present else None
    conv = [m.get(CONVENTION_FIELD) for m in (nested, config) if m.get(CONVENTION_FIELD) is not None]
    if any(c not in ("layer_output", "hidden_states") for c in conv) or len(set(conv)) > 1:
        return None
    use_aux = nested.get("use_aux_hidden_state")
    if use_aux is not None and type(use_aux) is not bool:
        return None
    if use_aux is False:
        return None
    num_aux = config.get("num_aux_hidden_states")
    if num_aux is not None and (type(num_aux) is not int or num_aux < 1):
        return None
    if ids is None:
        indices, convention = [2, num_layers // 2, num_layers - 3], "sglang_stock"
    elif -1 in ids:
        if conv == ["hidden_states"]:
            return None
        indices, convention = [i + 1 for i in ids], "layer_output"
    elif conv:
        indices, convention = ([i + 1 for i in ids] if conv[0] == "layer_output" else ids), conv[0]
    else:
        indices, convention = ([i + 1 for i in ids] if ids[0] == 1 else ids), "sglang_stock"
    if not all(0 <= i < num_layers for i in indices) or len(set(indices)) != len(indices):
        return None
    nested_ids = nested.get(IDS_FIELD)
    expected_count = num_aux if num_aux is not None else (len(nested_ids) if nested_ids else 3)
    if len(indices) != expected_count:
        return None
    return indices, convention


@settings(max_examples=400)
@given(messy_draft_config(), st.integers(2, 70))
def test_any_json_gives_a_plan_or_a_clear_error_agreeing_with_the_oracle(config, num_layers):
    expected = oracle(config, num_layers)
    try:
        plan = resolve_capture_plan(config, num_layers)
    except DraftConfigError as err:
        assert expected is None, f"refused a config the oracle accepts: {err}"
        assert str(err)
        return
    assert isinstance(plan, CapturePlan)
    assert expected == (list(plan.indices), plan.convention.value)


@pytest.mark.parametrize("bad", [0, -3, True, 2.5, "61"])
def test_bad_layer_count(bad):
    with pytest.raises(DraftConfigError, match="num_hidden_layers"):
        resolve_capture_plan({}, bad)


def test_log_line_names_the_tensors_in_order():
    plan = resolve_capture_plan({IDS_FIELD: [30, -1, 2]}, 61)
    line = plan.log_line()
    assert "[output of layer 30, embedding output, output of layer 2]" in line
    assert "from top level" in line and "capture indices [31, 0, 3]" in line


@pytest.mark.parametrize(
    ("config", "outcome"),
    [
        ({"eagle_config": {IDS_FIELD: [-1, 2, 30]}}, "captured 2 of 3"),
        ({IDS_FIELD: [-1, 2, 30]}, "serves [output of layer 1, output of layer 29, output of layer 57]"),
        (
            {"eagle_config": {IDS_FIELD: [0, 3, 31]}},
            "serves [embedding output, output of layer 2, output of layer 30]",
        ),
        (
            {"eagle_config": {IDS_FIELD: [1, 29, 57]}},
            "serves [output of layer 1, output of layer 29, output of layer 57]",
        ),
        ({"eagle_config": {IDS_FIELD: [-1, 61]}}, "no listed index matches a layer"),
        ({"eagle_config": {IDS_FIELD: [-1, 60]}}, "captured 1 of 2"),
    ],
)
def test_stock_reading_reproduces_sglang_0_5_23(config, outcome):
    assert outcome in stock_reading(config, 61).outcome
