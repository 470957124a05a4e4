"""core.pd_pair: the rules of a PD pair, the prefill and decode command lines compared. Matching
sides pass; each mismatch is an error naming the flag and the side to change (a warning where check
cannot tell two models apart). Pure: Sides built from dictionaries."""

import pytest

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core import rule_ids
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.core.findings import Severity
from sglang_eagle3_embed.core.rules.pair import PAIR_RULES, Pair, Side
from sglang_eagle3_embed.core.rules.table import Stage, evaluate, verdicts
from tests.support.deployments import DRAFT, RAW, TARGET, deployment

SETTINGS = {
    "model_path": "TARGET",
    "revision": None,
    "speculative_draft_model_path": "DRAFT",
    "speculative_draft_model_revision": None,
    "speculative_algorithm": "EAGLE3",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
    "page_size": 1,
    "kv_cache_dtype": "auto",
    "disaggregation_transfer_backend": "mooncake",
}
TOP_LEVEL = {**{k: v for k, v in DRAFT.items() if k != "eagle_config"}, IDS_FIELD: [-1, 2, 4]}


def side(mode, given_as="the command line", raw=None, settings=None, resolved=True, **configs):
    raw = {**RAW, "disaggregation_mode": mode, **(raw or {})}
    return Side(given_as, deployment(raw=raw, **configs), {**SETTINGS, **(settings or {})}, resolved)


def prefill(**kwargs):
    return side("prefill", **kwargs)


def decode(**kwargs):
    return side("decode", "the --pd-peer command line", **kwargs)


def compare(first, peer):
    return evaluate(Pair.of(first, peer), Stage.PAIR, PAIR_RULES)


def pair_verdicts(found):
    return verdicts(found, PAIR_RULES)


def only(found, rule_id):
    (finding,) = [f for f in found if f.rule == rule_id]
    return finding


def test_matching_sides_pass_every_rule():
    found = compare(prefill(), decode())
    assert found == []
    assert pair_verdicts(found) == dict.fromkeys(PAIR_RULES, "ok")


def test_sides_are_named_by_role_in_either_order():
    found = compare(decode(settings={"page_size": 16}), prefill())
    assert (
        "the prefill side resolves 1, the decode side 16" in only(found, rule_ids.PD_PAIR_PAGE_SIZE).message
    )


@pytest.mark.parametrize(
    ("first", "peer", "blamed", "fix"),
    [
        ("prefill", "prefill", "the --pd-peer command line", "--disaggregation-mode decode"),
        ("decode", "decode", "the --pd-peer command line", "--disaggregation-mode prefill"),
        ("prefill", "null", "the --pd-peer command line", "--disaggregation-mode decode"),
        ("null", "decode", "the command line", "--disaggregation-mode prefill"),
    ],
)
def test_a_pair_that_is_not_one_prefill_and_one_decode_is_an_error(first, peer, blamed, fix):
    finding = only(compare(side(first), side(peer, "the --pd-peer command line")), rule_ids.PD_PAIR_ROLES)
    assert finding.severity is Severity.ERROR and "--disaggregation-mode" in finding.message
    assert finding.message.endswith(f"Fix: pass {fix} on {blamed}.")


@pytest.mark.parametrize("plugin_on", ["prefill", "decode"])
def test_the_plugin_on_one_side_only_is_an_error_naming_the_other(plugin_on):
    stock = {"model_impl": "auto"}
    a = prefill(raw=None if plugin_on == "prefill" else stock)
    b = decode(raw=None if plugin_on == "decode" else stock)
    found = compare(a, b)
    without = "the decode side" if plugin_on == "prefill" else "the prefill side"
    plugin = only(found, rule_ids.PD_PAIR_PLUGIN)
    assert plugin.severity is Severity.ERROR and plugin.message.startswith("--model-impl: ")
    assert f"Fix: pass --model-impl {MODEL_IMPL} on {without} too" in plugin.message
    capture = only(found, rule_ids.PD_PAIR_CAPTURE)  # nested [-1, 2, 4]: stock fails at startup
    assert capture.message.endswith(f"Fix: pass --model-impl {MODEL_IMPL} on {without}.")
    assert "captured 2 of 3 aux hidden states" in capture.message


def test_a_stock_decode_with_top_level_ids_feeds_the_wrong_tensors_for_every_token():
    found = compare(prefill(draft=TOP_LEVEL), decode(draft=TOP_LEVEL, raw={"model_impl": "auto"}))
    capture = only(found, rule_ids.PD_PAIR_CAPTURE)
    assert capture.message.endswith(f"Fix: pass --model-impl {MODEL_IMPL} on the decode side.")
    assert (
        "the decode side (stock SGLang) serves [output of layer 1, output of layer 3, output of layer 4]"
        in (capture.message)
    )
    assert "silently feeds the draft the wrong tensors for every generated token" in capture.message


def test_a_stock_prefill_with_top_level_ids_builds_the_prompt_state_wrong():
    found = compare(prefill(draft=TOP_LEVEL, raw={"model_impl": "auto"}), decode(draft=TOP_LEVEL))
    capture = only(found, rule_ids.PD_PAIR_CAPTURE)
    assert capture.message.endswith(f"Fix: pass --model-impl {MODEL_IMPL} on the prefill side.")
    assert (
        "silently builds the draft's prompt KV cache and first proposal from the wrong tensors"
        in capture.message
    )


def test_ids_stock_reads_the_same_capture_the_same_but_the_plugin_still_differs():
    undeclared = {**DRAFT, "eagle_config": {IDS_FIELD: [1, 3, 5]}}
    found = compare(prefill(draft=undeclared), decode(draft=undeclared, raw={"model_impl": "auto"}))
    assert {f.rule for f in found} == {rule_ids.PD_PAIR_PLUGIN}


@pytest.mark.parametrize(
    ("setting", "flag"),
    [
        ("speculative_eagle_topk", "--speculative-eagle-topk"),
        ("speculative_num_steps", "--speculative-num-steps"),
        ("speculative_num_draft_tokens", "--speculative-num-draft-tokens"),
        ("page_size", "--page-size"),
        ("kv_cache_dtype", "--kv-cache-dtype"),
        ("disaggregation_transfer_backend", "--disaggregation-transfer-backend"),
    ],
)
def test_each_setting_that_differs_is_an_error_naming_its_flag(setting, flag):
    found = compare(prefill(), decode(settings={setting: "other"}))
    (finding,) = found
    assert finding.severity is Severity.ERROR
    assert finding.message.startswith(f"{flag}: the prefill side ")
    assert (
        "the decode side other" in finding.message
        and f"Fix: pass the same {flag} on both sides" in finding.message
    )


def test_settings_a_side_did_not_resolve_are_not_checked():
    found = compare(prefill(resolved=False), decode(settings={"page_size": 16}))
    verdicts = pair_verdicts(found)
    assert verdicts[rule_ids.PD_PAIR_PAGE_SIZE] == "not checked"
    assert verdicts[rule_ids.PD_PAIR_SPECULATIVE_SETTINGS] == "not checked"
    assert "resolution did not run on the prefill side" in only(found, rule_ids.PD_PAIR_PAGE_SIZE).message


def test_speculation_on_one_side_only_is_an_error_naming_the_side_without():
    none = {"speculative_algorithm": None}
    found = compare(prefill(raw=none, settings=none), decode())
    finding = only(found, rule_ids.PD_PAIR_SPECULATIVE)
    assert finding.message.startswith("--speculative-algorithm: ")
    assert "Fix: pass the same speculative flags on the prefill side" in finding.message
    assert "the prefill side no speculative decoding" in finding.message


def test_another_algorithm_is_an_error():
    found = compare(
        prefill(), decode(raw={"speculative_algorithm": "EAGLE"}, settings={"speculative_algorithm": "EAGLE"})
    )
    assert (
        "the prefill side runs EAGLE3, the decode side EAGLE"
        in only(found, rule_ids.PD_PAIR_SPECULATIVE).message
    )


def test_another_draft_config_is_an_error():
    other = {**DRAFT, "vocab_size": 256}
    found = compare(prefill(), decode(draft=other, settings={"speculative_draft_model_path": "OTHER"}))
    draft = only(found, rule_ids.PD_PAIR_DRAFT)
    assert draft.severity is Severity.ERROR
    assert draft.message.startswith("--speculative-draft-model-path / --speculative-draft-model-revision: ")
    assert (
        "the prefill side loads DRAFT, the decode side OTHER" in draft.message
        and "(vocab_size)" in draft.message
    )


def test_another_target_config_is_an_error_even_under_the_same_name():
    other = {**TARGET, "num_hidden_layers": 6}
    found = compare(prefill(), decode(target=other))
    target = only(found, rule_ids.PD_PAIR_TARGET)
    assert target.severity is Severity.ERROR and target.message.startswith("--model-path / --revision: ")
    assert "num_hidden_layers" in target.message


def test_the_same_config_under_another_name_is_a_warning():
    found = compare(prefill(), decode(settings={"model_path": "/mnt/target", "revision": "v1"}))
    target = only(found, rule_ids.PD_PAIR_MODEL_NAMES)
    assert target.severity is Severity.WARNING and target.message.startswith("--model-path / --revision: ")
    assert "the decode side /mnt/target at revision v1" in target.message
    assert pair_verdicts(found)[rule_ids.PD_PAIR_TARGET] == "ok"
