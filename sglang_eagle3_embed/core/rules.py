"""The startup validation rules: one table, one source of truth. Pure module.

Each rule has a stable id, a severity, what SGLang 0.5.23 does without it, and a check that reads a
:class:`~sglang_eagle3_embed.core.deployment.Deployment` (what the user passed, what SGLang
resolved, the target's and the draft's configs) and returns findings whose messages name the flag
or field, the value, what SGLang would have done silently, and the fix. ``docs/validation.md`` is
generated from :data:`RULES` (``python -m tools.validation_docs``); a test keeps them in sync.

Rules run in two stages: ``pre`` on the flags as passed, before SGLang's speculative resolution
(which would otherwise stop on a bare ``assert``), and ``post`` after it.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.deployment import EAGLE_FAMILY, Deployment
from sglang_eagle3_embed.core.draft_config import CapturePlan, stock_reading
from sglang_eagle3_embed.core.errors import DraftConfigError, UnsupportedModeError
from sglang_eagle3_embed.core.findings import Finding, NotChecked, Severity
from sglang_eagle3_embed.core.ids import CONVENTION_FIELD, IDS_FIELD

__all__ = ["RULES", "Rule", "evaluate", "not_checked"]


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    stage: str
    title: str
    silent: str
    """What SGLang 0.5.23 does when the rule would fire, with the source line."""
    check: Callable[[Deployment], Iterable[str | NotChecked]]
    """Yields a message per problem, or :class:`NotChecked` when it lacks what it reads."""


RULES: dict[str, Rule] = {}


def rule(rule_id: str, severity: Severity, stage: str, title: str, silent: str):
    def register(check):
        RULES[rule_id] = Rule(rule_id, severity, stage, title, silent, check)
        return check

    return register


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _plan(d: Deployment) -> CapturePlan | NotChecked:
    """The capture plan, or why a rule that reads it cannot be checked (other rules report why)."""
    if isinstance(d.capture, CapturePlan):
        return d.capture
    if isinstance(d.capture, DraftConfigError):
        return NotChecked(f"the draft's capture plan stopped at [{d.capture.rule}]")
    return NotChecked(d.no_capture)


# ---------------------------------------------------------------- pre: flags as passed


@rule(
    "partial-spec-triple",
    Severity.ERROR,
    "pre",
    "Top-k or draft tokens given without the number of steps",
    "stops with a bare AssertionError (srt/arg_groups/speculative_hook.py:1159-1163); with none of "
    "the three, picks (3, 1, 4) itself for DeepSeek/Kimi targets (1430-1461)",
)
def _partial_triple(d: Deployment):
    if d.algorithm not in EAGLE_FAMILY or d.raw.get("speculative_adaptive"):
        return
    if d.raw.get("speculative_num_steps") is not None:
        return
    given = [
        n for n in ("speculative_eagle_topk", "speculative_num_draft_tokens") if d.raw.get(n) is not None
    ]
    if given:
        passed = " and ".join(f"{_flag(n)} {d.raw[n]}" for n in given)
        yield (
            f"{passed} given without --speculative-num-steps: SGLang stops with a bare "
            f"AssertionError. Pass all three, e.g. --speculative-num-steps 3 "
            f"--speculative-eagle-topk 1 --speculative-num-draft-tokens 4."
        )


@rule(
    "model-impl-typo",
    Severity.ERROR,
    "pre",
    "A --model-impl that looks like the plugin's but is not",
    "accepts any --model-impl string and treats an unknown one like 'sglang' "
    "(srt/arg_groups/fields/model.py:126; srt/model_loader/utils.py:228-231)",
)
def _model_impl_typo(d: Deployment):
    impl = str(d.raw.get("model_impl") or "")
    if impl == MODEL_IMPL or impl in ("auto", "sglang", "transformers", "mindspore"):
        return
    if "eagle3" in impl.lower() or difflib.SequenceMatcher(None, impl.lower(), MODEL_IMPL).ratio() > 0.8:
        yield (
            f"--model-impl {impl} is not {MODEL_IMPL}: SGLang would silently serve its stock "
            f"DeepSeek classes. Fix: --model-impl {MODEL_IMPL}."
        )


@rule(
    "plugin-inactive",
    Severity.ERROR,
    "pre",
    "--model-impl sglang_eagle3_embed given but the plugin is not active",
    "swallows plugin errors (srt/plugins/__init__.py:83,135) and serves the stock classes",
)
def _plugin_inactive(d: Deployment):
    if d.plugin_requested and not d.plugin_active:
        yield f"--model-impl {MODEL_IMPL} was given but the plugin is not active: {d.plugin_reason}"


# ---------------------------------------------------------------- post: after SGLang's resolution


@rule(
    "draft-tokens-rewritten",
    Severity.ERROR,
    "post",
    "--speculative-num-draft-tokens silently changed",
    "sets num_draft_tokens = num_steps + 1 when topk is 1, with only a log line "
    "(srt/arg_groups/speculative_hook.py:1255-1266), or under --speculative-adaptive, without "
    "one (1423-1427)",
)
def _draft_tokens_rewritten(d: Deployment):
    name = "speculative_num_draft_tokens"
    if name not in d.explicit or name not in d.resolved or d.resolved[name] == d.raw[name]:
        return
    passed, got = d.raw[name], d.resolved[name]
    steps = d.value("speculative_num_steps")
    if d.value("speculative_adaptive"):
        fix = "drop --speculative-num-draft-tokens (adaptive picks it), or drop --speculative-adaptive"
    else:
        fix = (
            f"to draft {passed} tokens in a chain pass --speculative-num-steps {passed - 1}; "
            f"to keep --speculative-num-steps {steps} pass --speculative-num-draft-tokens {got} "
            f"(or a --speculative-eagle-topk above 1 for a tree of {passed} tokens)"
        )
    yield (
        f"--speculative-num-draft-tokens {passed} with --speculative-num-steps {steps} and "
        f"--speculative-eagle-topk {d.value('speculative_eagle_topk')}: SGLang would "
        f"silently draft {got} tokens instead of {passed}. Fix: {fix}."
    )


@rule(
    "page-size-forced",
    Severity.ERROR,
    "post",
    "--page-size silently changed",
    "forces the page size for some attention backends (srt/arg_groups/overrides.py:1143-1199, 1276-1296)",
)
def _page_size_forced(d: Deployment):
    if (
        "page_size" in d.explicit
        and "page_size" in d.resolved
        and d.resolved["page_size"] != d.raw["page_size"]
    ):
        yield (
            f"--page-size {d.raw['page_size']}: SGLang would silently use "
            f"{d.resolved['page_size']} with this attention backend. Fix: --page-size "
            f"{d.resolved['page_size']}, or another --attention-backend."
        )


@rule(
    "cuda-graph-above-max-running",
    Severity.WARNING,
    "post",
    "Decode CUDA graphs larger than the running-request cap",
    "caps --max-running-requests at 48 for speculative decoding when unset (srt/arg_groups/"
    "speculative_hook.py:1086-1095), after the CUDA-graph batch sizes were chosen (pipeline.py:218)",
)
def _cuda_graph_above_max_running(d: Deployment):
    max_bs = d.raw.get("cuda_graph_max_bs_decode")
    cap = d.value("max_running_requests")
    if (
        "cuda_graph_max_bs_decode" in d.explicit
        and "max_running_requests" not in d.explicit
        and cap
        and max_bs > cap
    ):
        yield (
            f"--cuda-graph-max-bs-decode {max_bs} but SGLang caps speculative decoding at "
            f"{cap} running requests: graphs above {cap} are never replayed. Fix: pass "
            f"--max-running-requests {max_bs}, or --cuda-graph-max-bs-decode {cap}."
        )


@rule(
    "draft-path-missing",
    Severity.ERROR,
    "post",
    "EAGLE-3 without --speculative-draft-model-path",
    "uses the target checkpoint as its own draft for DeepSeek-family targets "
    "(srt/arg_groups/speculative_hook.py:1120-1156)",
)
def _draft_path_missing(d: Deployment):
    if d.eagle3 and not d.raw.get("speculative_draft_model_path"):
        silently = (
            f" ({d.value('speculative_draft_model_path')} is the target itself)"
            if d.value("speculative_draft_model_path")
            else ""
        )
        yield (
            f"--speculative-algorithm EAGLE3 without --speculative-draft-model-path: SGLang "
            f"would silently load the target as its own EAGLE-3 draft{silently}. Fix: pass "
            f"--speculative-draft-model-path DRAFT."
        )


def _looks_eagle3(draft: Mapping) -> bool:
    archs = draft.get("architectures") or []
    nested = draft.get("eagle_config") if isinstance(draft.get("eagle_config"), Mapping) else {}
    return (
        any("eagle3" in str(a).lower() for a in archs if isinstance(archs, list))
        or IDS_FIELD in draft
        or IDS_FIELD in nested
        or nested.get("use_aux_hidden_state") is True
    )


@rule(
    "eagle-with-eagle3-draft",
    Severity.ERROR,
    "post",
    "An EAGLE-3 draft served under --speculative-algorithm EAGLE or NEXTN",
    "captures no aux hidden states and skips the draft's fc because the widths match "
    "(srt/models/llama_eagle3.py:238-247): accept length about 1.0",
)
def _eagle_with_eagle3_draft(d: Deployment):
    if d.algorithm in ("EAGLE", "NEXTN") and _looks_eagle3(d.draft_fields):
        yield (
            f"--speculative-algorithm {d.algorithm} with an EAGLE-3 draft (it declares aux hidden "
            f"states): SGLang would silently skip the draft's fc and feed it the final "
            f"hidden state, accept length about 1.0. Fix: --speculative-algorithm EAGLE3."
        )


@rule(
    "draft-config-unreadable",
    Severity.ERROR,
    "pre",
    "The draft's config.json cannot be read",
    "fails later while loading the draft, or reads no ids and captures defaults",
)
def _draft_unreadable(d: Deployment):
    if d.eagle3 and d.raw.get("speculative_draft_model_path") and d.draft_error:
        yield f"cannot read the draft's config.json: {d.draft_error}. Fix the file, then launch again."


@rule(
    "draft-weights-unreadable",
    Severity.ERROR,
    "pre",
    "The draft's weights cannot be read (an interrupted download, a broken index)",
    "fails while loading the draft, after the target's weights were loaded",
)
def _draft_weights_unreadable(d: Deployment):
    if d.eagle3 and d.draft_weights_error:
        yield (
            f"cannot read the draft's weights: {d.draft_weights_error}. SGLang would fail while "
            f"loading the draft, after loading the target. Fix: download the draft again (or repair "
            f"its model.safetensors.index.json)."
        )


_DRAFT_RULES = {
    "target-config": (
        "The target's config has no usable layer count",
        "stops only while loading the model, after its weights are read, when the plugin plans the captures",
    ),
    "draft-config-shape": (
        "Malformed draft config fields",
        "ignores a malformed eagle_config and captures defaults",
    ),
    "draft-ids-invalid": (
        "Aux layer ids that are not distinct integers",
        "fails late or captures fewer states",
    ),
    "draft-ids-conflict": (
        "Nested and top-level ids (or conventions) disagree",
        "the target reads the nested list while the draft may size its fc from the other",
    ),
    "draft-ids-convention": (
        "Id convention invalid or contradicting the ids",
        "guesses the convention from the first id (srt/models/deepseek_v2.py:3458-3473, PR #25454)",
    ),
    "draft-ids-range": (
        "Ids outside what the target can capture",
        "fails at startup with 'captured k of n aux hidden states' (srt/layers/aux_hidden_states.py:84-90)",
    ),
    "draft-use-aux-off": (
        "use_aux_hidden_state is false under EAGLE3",
        "captures nothing and skips the draft's fc silently",
    ),
    "draft-aux-count": (
        "Number of ids differs from what the draft's fc reads",
        "fails in a matmul or a static-buffer copy, or passes garbage",
    ),
}


def _draft_rule(rule_id: str):
    """The check of one draft-config rule: the plan's error or warnings carrying that rule id."""

    def check(d: Deployment):
        if not d.eagle3:
            return
        if isinstance(d.capture, DraftConfigError) and d.capture.rule == rule_id:
            yield str(d.capture)
            return
        plan = _plan(d)
        if isinstance(plan, NotChecked):
            yield plan
            return
        yield from (w.message for w in plan.warnings if w.rule == rule_id)

    return check


for _id, (_title, _silent) in _DRAFT_RULES.items():
    rule(_id, Severity.ERROR, "post", _title, _silent)(_draft_rule(_id))
rule(
    "draft-ids-missing",
    Severity.WARNING,
    "post",
    "No aux layer ids in the draft config",
    "captures its default [2, L//2, L-3] silently (srt/models/deepseek_v2.py:3462-3465)",
)(_draft_rule("draft-ids-missing"))
rule(
    "draft-ids-undeclared",
    Severity.WARNING,
    "post",
    "Ids without -1 and without a declared convention",
    "reads them with the first-id heuristic (srt/models/deepseek_v2.py:3458-3473); the plugin keeps "
    "that reading and asks for a declaration",
)(_draft_rule("draft-ids-undeclared"))


def _draft_and_target(check):
    """For a rule that compares the draft's config with the target's: EAGLE-3 launches only, and
    not checked unless both configs were read."""

    def checked(d: Deployment):
        if not d.eagle3:
            return
        if d.no_capture:
            yield NotChecked(d.no_capture)
            return
        yield from check(d)

    return checked


@rule(
    "draft-fc-width",
    Severity.ERROR,
    "post",
    "The draft's fc weight does not read len(ids) x target hidden",
    "fails in the fc matmul, or skips fc when the widths happen to match (llama_eagle3.py:238-247)",
)
def _draft_fc_width(d: Deployment):
    if not d.eagle3:
        return
    plan = _plan(d)
    hidden = d.draft_fields.get("target_hidden_size") or d.target_text.get("hidden_size")
    if isinstance(plan, NotChecked):
        yield plan
        return
    if d.draft_fc_in_features is None:
        why = "its weights could not be read" if d.draft_weights_error else "no local fc.weight to read"
        yield NotChecked(f"the draft's fc width is unknown: {why}")
        return
    if not isinstance(hidden, int):
        yield NotChecked("neither the draft's target_hidden_size nor the target's hidden_size is an integer")
        return
    expected = len(plan.indices) * hidden
    if d.draft_fc_in_features != expected:
        yield (
            f"the draft's fc.weight reads {d.draft_fc_in_features} features but the target would "
            f"capture {len(plan.indices)} x {hidden} = {expected} ([{plan.describe()}]). The weights "
            f"were trained for another number of aux states: fix the ids or the checkpoint."
        )


@rule(
    "draft-target-hidden",
    Severity.ERROR,
    "post",
    "The draft's target_hidden_size differs from the target's hidden_size",
    "fails in the fc or in a static buffer copy (srt/speculative/eagle_utils.py:237-276)",
)
@_draft_and_target
def _draft_target_hidden(d: Deployment):
    draft, target_hidden = d.draft_fields, d.target_text.get("hidden_size")
    declared = draft.get("target_hidden_size") or draft.get("hidden_size")
    if not isinstance(target_hidden, int) or not isinstance(declared, int):
        yield NotChecked("the draft's target_hidden_size or the target's hidden_size is not an integer")
        return
    if declared != target_hidden:
        name = (
            "target_hidden_size" if draft.get("target_hidden_size") else "hidden_size (no target_hidden_size)"
        )
        yield (
            f"the draft's {name} is {declared} but the target's hidden_size is {target_hidden}: the "
            f"draft was built for another target. Fix: use the draft trained for this target, or set "
            f"target_hidden_size to {target_hidden} if the draft's own width differs on purpose."
        )


@rule(
    "draft-vocab",
    Severity.ERROR,
    "post",
    "Draft and target vocabularies disagree",
    "fails at load or maps draft tokens to the wrong target tokens",
)
@_draft_and_target
def _draft_vocab(d: Deployment):
    draft, target_vocab = d.draft_fields, d.target_text.get("vocab_size")
    vocab, draft_vocab = draft.get("vocab_size"), draft.get("draft_vocab_size")
    if not isinstance(target_vocab, int):
        yield NotChecked("the target's vocab_size is not an integer")
        return
    if isinstance(vocab, int) and vocab != target_vocab:
        yield (
            f"the draft's vocab_size is {vocab} but the target's is {target_vocab}. Fix: set the "
            f"draft's vocab_size to {target_vocab} (a reduced draft vocabulary goes in draft_vocab_size)."
        )
    if isinstance(draft_vocab, int) and draft_vocab > target_vocab:
        yield f"the draft's draft_vocab_size {draft_vocab} exceeds the target's vocab_size {target_vocab}."


@rule(
    "stock-misreads-draft",
    Severity.ERROR,
    "post",
    "Stock SGLang would capture other tensors than the draft was trained on",
    "dies at startup or serves the wrong tensors (first-id heuristic, nested ids only, ascending order)",
)
def _stock_misreads(d: Deployment):
    if not d.eagle3 or not d.family or d.plugin_requested:
        return
    plan = _plan(d)
    if isinstance(plan, NotChecked):
        yield plan
        return
    stock_indices, outcome = stock_reading(d.draft, d.target_text["num_hidden_layers"])
    if list(plan.indices) != stock_indices:
        yield (
            f"the draft reads [{plan.describe()}], but stock SGLang {outcome}. "
            f"Fix: add --model-impl {MODEL_IMPL}."
        )


@rule(
    "target-not-deepseek",
    Severity.ERROR,
    "post",
    "--model-impl sglang_eagle3_embed on a target outside the DeepSeek family",
    "treats the unknown --model-impl like 'sglang'",
)
def _target_not_deepseek(d: Deployment):
    if d.plugin_requested and d.target is not None and not d.family:
        yield str(UnsupportedModeError.not_deepseek(d.target_arch))


@rule(
    "pipeline-parallel",
    Severity.ERROR,
    "post",
    "Pipeline parallelism with EAGLE-3 on the DeepSeek family",
    "captures on the last stage only (srt/models/deepseek_v2.py:3459-3460); the embedding and early "
    "layers live on the first stage",
)
def _pipeline_parallel(d: Deployment):
    pp = d.value("pp_size") or 1
    if d.eagle3 and d.family and pp > 1:
        yield str(UnsupportedModeError.pipeline_parallel(pp, f"EAGLE3 on {d.target_arch}"))


@rule(
    "two-batch-overlap",
    Severity.ERROR,
    "post",
    "Two-batch overlap with EAGLE-3 on the DeepSeek family",
    "runs the layers after first_k_dense_replace through model_forward_stages, which has no capture "
    "point (srt/models/deepseek_v2.py:3163-3172, 3202-3210)",
)
def _two_batch_overlap(d: Deployment):
    if d.eagle3 and d.family and d.value("enable_two_batch_overlap"):
        yield str(UnsupportedModeError.two_batch_overlap(f"EAGLE3 on {d.target_arch}"))


def _override_keys(value) -> set[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError:
            return set()
    return set(value) if isinstance(value, Mapping) else set()


@rule(
    "json-override-eagle-config",
    Severity.ERROR,
    "post",
    "--json-model-override-args touching the draft's aux-state fields",
    "applies the override to the target's config too (srt/configs/model_config.py:962)",
)
def _json_override(d: Deployment):
    keys = {"eagle_config", IDS_FIELD, CONVENTION_FIELD, "num_aux_hidden_states"}
    touched = sorted(keys & _override_keys(d.raw.get("json_model_override_args")))
    if touched:
        yield (
            f"--json-model-override-args sets {', '.join(touched)}: SGLang applies it to the target's "
            f"config as well as the draft's. Fix: edit the draft's config.json instead."
        )


rule(
    "sglang-resolution",
    Severity.ERROR,
    "resolution",
    "SGLang's own argument resolution refused the launch",
    "raises its own error; `check` reports it verbatim instead of a traceback",
)(lambda d: ())


def evaluate(d: Deployment, stage: str) -> list[Finding]:
    """Run every rule of ``stage`` (``pre`` or ``post``) on ``d``."""
    findings = []
    for r in RULES.values():
        if r.stage == stage:
            findings.extend(_finding(r, item) for item in r.check(d))
    return findings


def _finding(r: Rule, item: str | NotChecked) -> Finding:
    if isinstance(item, NotChecked):
        return Finding(r.id, Severity.NOT_CHECKED, f"not checked: {item.why}")
    return Finding(r.id, r.severity, item)


def not_checked(stage: str, why: str) -> list[Finding]:
    """Every rule of ``stage``, reported as not checked (the stage did not run)."""
    return [
        Finding(r.id, Severity.NOT_CHECKED, f"not checked: {why}") for r in RULES.values() if r.stage == stage
    ]
