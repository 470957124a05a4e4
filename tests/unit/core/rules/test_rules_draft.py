"""core.rules_draft on malformed draft and target fields: a value the draft's fc, embedding or
lm_head is sized from, that no deployment can run with, is an error naming the field, the value
and the fix, never "ok" or "not checked". Pure: Deployments built from dictionaries."""

import math

import pytest

from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.core.findings import Severity
from sglang_eagle3_embed.core.readers.deployment import Deployment
from sglang_eagle3_embed.core.rules.table import Stage, evaluate
from tests.support.deployments import DRAFT, RAW, TARGET, deployment


def by_rule(d: Deployment) -> dict:
    found = {}
    for stage in (Stage.PRE, Stage.POST):
        for f in evaluate(d, stage):
            found.setdefault(f.rule, []).append(f)
    return found


def errors(d: Deployment, rule_id: str) -> list[str]:
    return [f.message for f in by_rule(d).get(rule_id, []) if f.severity is Severity.ERROR]


def test_the_base_deployment_is_clean():
    assert by_rule(deployment()) == {}


@pytest.mark.parametrize("value", [False, True, "64", 0, -64, 64.0, math.nan, [64], {"a": 1}])
def test_a_malformed_target_hidden_size_is_an_error(value):
    found = errors(deployment(draft={**DRAFT, "target_hidden_size": value}), "draft-target-hidden")
    assert len(found) == 1
    assert (
        f"target_hidden_size is {value!r}" in found[0]
        and "Fix: set the draft's target_hidden_size to 64" in found[0]
    )


def test_a_null_target_hidden_size_falls_back_to_the_drafts_hidden_size():
    assert by_rule(deployment(draft={**DRAFT, "target_hidden_size": None})) == {}


@pytest.mark.parametrize("value", [None, "64", 0, True])
def test_without_target_hidden_size_the_drafts_hidden_size_must_be_a_positive_integer(value):
    draft = {k: v for k, v in DRAFT.items() if k != "hidden_size"}
    if value is not None:
        draft["hidden_size"] = value
    (message,) = errors(deployment(draft=draft), "draft-target-hidden")
    assert "hidden_size" in message and "(and no target_hidden_size)" in message and "Fix" in message


@pytest.mark.parametrize("value", [None, 0, "64"])
def test_a_target_without_a_usable_hidden_size_is_an_error_not_a_fix_to_copy_it(value):
    target = {**TARGET, "hidden_size": value}
    (message,) = errors(deployment(target=target), "draft-target-hidden")
    assert "the target's config" in message and "use the target's original config.json" in message
    assert "set target_hidden_size to" not in message
    assert by_rule(deployment(target=target))["draft-fc-width"][0].severity is Severity.NOT_CHECKED


def test_a_draft_for_another_target_width_keeps_its_message():
    (message,) = errors(deployment(draft={**DRAFT, "target_hidden_size": 32}), "draft-target-hidden")
    assert message.startswith("the draft's target_hidden_size is 32 but the target's hidden_size is 64")


@pytest.mark.parametrize("value", ["missing", None, "128", True, 0, 128.0, math.inf])
def test_the_drafts_vocab_size_must_be_a_positive_integer(value):
    draft = {k: v for k, v in DRAFT.items() if k != "vocab_size"}
    if value != "missing":
        draft["vocab_size"] = value
    (message,) = errors(deployment(draft=draft), "draft-vocab")
    expected = "has no vocab_size" if value in ("missing", None) else f"vocab_size is {value!r}"
    assert expected in message and "Fix: set the draft's vocab_size to 128" in message


@pytest.mark.parametrize("value", ["x", 0, -1, True, 256, 1.5])
def test_a_given_draft_vocab_size_must_fit_the_target(value):
    (message,) = errors(deployment(draft={**DRAFT, "draft_vocab_size": value}), "draft-vocab")
    assert (
        f"draft_vocab_size is {value!r}" in message
        and "no larger than the target's vocab_size 128" in message
    )


@pytest.mark.parametrize("value", [None, 64, 128])
def test_a_draft_vocab_size_within_the_targets_is_accepted(value):
    assert by_rule(deployment(draft={**DRAFT, "draft_vocab_size": value})) == {}


@pytest.mark.parametrize("value", [None, -1, "128"])
def test_a_target_without_a_usable_vocab_size_is_an_error(value):
    (message,) = errors(deployment(target={**TARGET, "vocab_size": value}), "draft-vocab")
    assert "the target's config" in message and "use the target's original config.json" in message


def test_local_weights_without_an_fc_weight_are_an_error():
    """The target's own folder passed as the draft: its weights hold no fc.weight, and SGLang would
    serve a draft whose fc it never loaded."""
    (message,) = errors(deployment(draft_fc_in_features=None), "draft-fc-width")
    assert "(model.safetensors) hold no fc.weight" in message and "Fix" in message


def test_no_local_weights_leave_the_fc_width_not_checked():
    (finding,) = by_rule(deployment(draft_fc_in_features=None, draft_weight_files=()))["draft-fc-width"]
    assert finding.severity is Severity.NOT_CHECKED


def test_the_fc_width_reads_the_drafts_target_hidden_size():
    d = deployment(draft={**DRAFT, "target_hidden_size": 32}, draft_fc_in_features=96)
    assert "draft-fc-width" not in by_rule(d)


def test_an_unreadable_target_config_is_a_target_config_error():
    why = "/models/target/config.json: is not a regular file but a FIFO"
    found = by_rule(deployment(target=None, target_error=why))
    (finding,) = found["target-config"]
    assert finding.severity is Severity.ERROR and why in finding.message and "Fix" in finding.message
    assert why in found["draft-ids-range"][0].message  # the rules that plan from it say why not


def warnings(d: Deployment, rule_id: str) -> list[str]:
    return [f.message for f in by_rule(d).get(rule_id, []) if f.severity is Severity.WARNING]


def stock_on(arch: str, ids, layers: int = 92, where: str = "eagle_config") -> Deployment:
    draft = {k: v for k, v in DRAFT.items() if k != "eagle_config"}
    draft.update({"eagle_config": {IDS_FIELD: ids}} if where == "eagle_config" else {IDS_FIELD: ids})
    raw = {k: v for k, v in RAW.items() if k != "model_impl"}
    target = {**TARGET, "architectures": [arch], "num_hidden_layers": layers}
    layers_held = {i: frozenset({"mlp"}) for i in range(layers)}
    return deployment(target=target, draft=draft, raw=raw, target_layers=layers_held)


def test_undeclared_ids_are_worded_for_the_model_that_serves_them():
    """GLM-4.x MoE adds 1 to every id, GLM-4.7-Flash keeps the first-id heuristic: the warning
    states the reading of the model that serves the launch."""
    (add_one,) = warnings(stock_on("Glm4MoeForCausalLM", [2, 46, 89]), "draft-ids-undeclared")
    assert "Glm4MoeForCausalLM (add-one: +1 to every id)" in add_one
    assert "reads them as [output of layer 2, output of layer 46, output of layer 89]" in add_one
    (first_id,) = warnings(stock_on("Glm4MoeLiteForCausalLM", [2, 23, 44], 47), "draft-ids-undeclared")
    assert "first-id heuristic" in first_id
    assert "reads them as [output of layer 1, output of layer 22, output of layer 43]" in first_id


def test_a_trainers_default_where_it_writes_it_is_information_not_a_warning():
    assert warnings(stock_on("Glm4MoeForCausalLM", [1, 45, 88]), "draft-ids-undeclared") == []
    assert warnings(stock_on("Glm4MoeLiteForCausalLM", [1, 22, 43], 47), "draft-ids-undeclared") == []
    assert (
        warnings(deployment(draft={**DRAFT, "eagle_config": {IDS_FIELD: [1, 3, 4]}}), "draft-ids-undeclared")
        == []
    )
    speculators = stock_on("Glm4MoeForCausalLM", [2, 46, 89], where="top")
    assert warnings(speculators, "draft-ids-undeclared") == []


def test_the_missing_ids_advice_never_breaks_a_working_stock_launch():
    draft = {k: v for k, v in DRAFT.items() if k != "eagle_config"}
    raw = {k: v for k, v in RAW.items() if k != "model_impl"}
    target = {**TARGET, "architectures": ["Glm4MoeLiteForCausalLM"], "num_hidden_layers": 47}
    held = {i: frozenset({"mlp"}) for i in range(47)}
    (message,) = warnings(
        deployment(target=target, draft=draft, raw=raw, target_layers=held), "draft-ids-missing"
    )
    assert "[1, 22, 43]" in message and "-1" not in message
