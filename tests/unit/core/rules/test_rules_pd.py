"""core.rules_pd: a PD-disaggregated launch with the plugin names what the other side must pass and
what it does with this draft without the plugin, keyed on where the draft's ids are written, for a
prefill and for a decode launch. Pure: Deployments from dictionaries."""

import pytest

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.capture.ids import CONVENTION_FIELD, IDS_FIELD
from sglang_eagle3_embed.core.findings import Severity
from tests.support.deployments import DRAFT, RAW, deployment, findings

BARE = {k: v for k, v in DRAFT.items() if k != "eagle_config"}
FORMS = {
    "nested -1": {**BARE, "eagle_config": {IDS_FIELD: [-1, 2, 4]}},
    "top-level": {**BARE, IDS_FIELD: [-1, 2, 4]},
    "declared convention": {**BARE, "eagle_config": {IDS_FIELD: [2, 4, 6], CONVENTION_FIELD: "layer_output"}},
    "undeclared without -1": {**BARE, "eagle_config": {IDS_FIELD: [1, 3, 5]}},
    "no ids": BARE,
}
PEER = {"prefill": "decode", "decode": "prefill"}


def pd_peer(mode, draft=DRAFT, **raw):
    d = deployment(draft=draft, raw={**RAW, "disaggregation_mode": mode, **raw})
    return [f for f in findings(d) if f.rule == "pd-peer"]


@pytest.mark.parametrize("mode", ["prefill", "decode"])
@pytest.mark.parametrize("form", list(FORMS))
def test_a_pd_launch_names_what_the_other_side_must_pass(form, mode):
    (finding,) = pd_peer(mode, FORMS[form])
    peer, message = PEER[mode], finding.message
    assert finding.severity is Severity.WARNING
    assert message.startswith(f"--disaggregation-mode {mode} with --model-impl {MODEL_IMPL}:")
    must = (
        f"The {peer} server must pass --model-impl {MODEL_IMPL} --speculative-algorithm EAGLE3 "
        f"--speculative-draft-model-path DRAFT --speculative-num-steps 3 --speculative-eagle-topk 1 "
        f"--speculative-num-draft-tokens 4"
    )
    assert must in message
    assert f"Fix: launch the {peer} server with those flags" in message and "--pd-peer" in message


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_nested_minus_one_a_stock_peer_fails_at_startup(mode):
    (finding,) = pd_peer(mode, FORMS["nested -1"])
    assert "ids [-1, 2, 4] in eagle_config" in finding.message
    assert (
        f"a {PEER[mode]} server without the plugin fails at startup: RuntimeError: captured 2 of 3 aux "
        f"hidden states"
    ) in finding.message


@pytest.mark.parametrize("form", ["top-level", "declared convention"])
def test_a_stock_decode_feeds_the_draft_other_tensors_for_every_token_silently(form):
    (finding,) = pd_peer("prefill", FORMS[form])
    stock = {
        "top-level": "1, output of layer 3, output of layer 4",
        "declared convention": "1, output of layer 3, output of layer 5",
    }
    assert (
        f"a decode server without the plugin silently feeds the draft [output of layer {stock[form]}]"
        in finding.message
    )
    assert "for every generated token" in finding.message
    why = {
        "top-level": "reads ids only from eagle_config",
        "declared convention": "ignores the declared convention",
    }
    assert why[form] in finding.message


@pytest.mark.parametrize("form", ["top-level", "declared convention"])
def test_a_stock_prefill_builds_the_prompt_state_from_other_tensors_silently(form):
    (finding,) = pd_peer("decode", FORMS[form])
    assert (
        "a prefill server without the plugin silently builds the draft's prompt KV cache" in finding.message
    )
    assert "for every generated token" not in finding.message


@pytest.mark.parametrize("mode", ["prefill", "decode"])
@pytest.mark.parametrize("form", ["undeclared without -1", "no ids"])
def test_ids_stock_reads_the_same_say_both_sides_capture_the_same(form, mode):
    (finding,) = pd_peer(mode, FORMS[form])
    assert f"a {PEER[mode]} server without the plugin captures the same tensors" in finding.message
    assert "silently" not in finding.message and "fails" not in finding.message


@pytest.mark.parametrize(
    "draft",
    [
        {**BARE, "eagle_config": {IDS_FIELD: [-1, 2, 2]}},  # a plan that stops at draft-ids-invalid
        {**BARE, "eagle_config": [-1, 2, 4]},  # malformed eagle_config
        None,  # no draft config read
    ],
)
def test_a_pd_launch_with_the_plugin_is_never_passed_without_naming_the_other_side(draft):
    (finding,) = pd_peer("decode", draft)
    assert finding.severity is Severity.WARNING
    assert "The prefill server must pass --model-impl" in finding.message


def test_the_draft_revision_the_launch_gives_is_named():
    (finding,) = pd_peer("prefill", speculative_draft_model_revision="v2")
    assert "--speculative-draft-model-path DRAFT --speculative-draft-model-revision v2" in finding.message


@pytest.mark.parametrize(
    "raw",
    [
        {"disaggregation_mode": "null"},
        {},
        {"disaggregation_mode": "decode", "model_impl": "auto"},
        {"disaggregation_mode": "decode", "speculative_algorithm": "EAGLE"},
    ],
)
def test_unified_stock_and_non_eagle3_launches_are_left_alone(raw):
    d = deployment(raw={**RAW, **raw})
    assert not [f for f in findings(d) if f.rule == "pd-peer"]


def test_a_target_outside_the_family_is_left_to_its_own_rule():
    target = {
        "architectures": ["LlamaForCausalLM"],
        "num_hidden_layers": 8,
        "hidden_size": 64,
        "vocab_size": 128,
    }
    d = deployment(target=target, raw={**RAW, "disaggregation_mode": "decode"})
    assert not [f for f in findings(d) if f.rule == "pd-peer"]
