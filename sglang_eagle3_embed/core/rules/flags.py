"""The startup rules on the launch flags: as passed (``pre``) and as SGLang resolves them
(``post``). Pure module; :mod:`sglang_eagle3_embed.core.rules.table` runs them."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.core.errors import flag
from sglang_eagle3_embed.core.readers.deployment import EAGLE_FAMILY, Deployment
from sglang_eagle3_embed.core.rule_ids import (
    CUDA_GRAPH_ABOVE_MAX_RUNNING,
    DRAFT_PATH_MISSING,
    DRAFT_TOKENS_REWRITTEN,
    EAGLE_WITH_EAGLE3_DRAFT,
    MODEL_IMPL_TYPO,
    PAGE_SIZE_FORCED,
    PARTIAL_SPEC_TRIPLE,
    PLUGIN_INACTIVE,
)
from sglang_eagle3_embed.core.rules.registry import rule

# ---------------------------------------------------------------- pre: flags as passed


@rule(PARTIAL_SPEC_TRIPLE)
def _partial_triple(d: Deployment):
    if d.algorithm not in EAGLE_FAMILY or d.raw.get("speculative_adaptive"):
        return
    if d.raw.get("speculative_num_steps") is not None:
        return
    given = [
        n for n in ("speculative_eagle_topk", "speculative_num_draft_tokens") if d.raw.get(n) is not None
    ]
    if given:
        passed = " and ".join(f"{flag(n)} {d.raw[n]}" for n in given)
        yield (
            f"{passed} given without --speculative-num-steps: SGLang stops with a bare "
            f"AssertionError. Pass all three, e.g. --speculative-num-steps 3 "
            f"--speculative-eagle-topk 1 --speculative-num-draft-tokens 4."
        )


@rule(MODEL_IMPL_TYPO)
def _model_impl_typo(d: Deployment):
    impl = str(d.raw.get("model_impl") or "")
    if impl == MODEL_IMPL or impl in ("auto", "sglang", "transformers", "mindspore"):
        return
    if "eagle3" in impl.lower() or difflib.SequenceMatcher(None, impl.lower(), MODEL_IMPL).ratio() > 0.8:
        yield (
            f"--model-impl {impl} is not {MODEL_IMPL}: SGLang would silently serve its stock "
            f"DeepSeek classes. Fix: --model-impl {MODEL_IMPL}."
        )


@rule(PLUGIN_INACTIVE)
def _plugin_inactive(d: Deployment):
    if d.plugin_requested and not d.plugin_active:
        yield f"--model-impl {MODEL_IMPL} was given but the plugin is not active: {d.plugin_reason}"


# ---------------------------------------------------------------- post: after SGLang's resolution


@rule(DRAFT_TOKENS_REWRITTEN)
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


@rule(PAGE_SIZE_FORCED)
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


@rule(CUDA_GRAPH_ABOVE_MAX_RUNNING)
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


@rule(DRAFT_PATH_MISSING)
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


@rule(EAGLE_WITH_EAGLE3_DRAFT)
def _eagle_with_eagle3_draft(d: Deployment):
    if d.algorithm in ("EAGLE", "NEXTN") and _looks_eagle3(d.draft_fields):
        yield (
            f"--speculative-algorithm {d.algorithm} with an EAGLE-3 draft (it declares aux hidden "
            f"states): SGLang would silently skip the draft's fc and feed it the final "
            f"hidden state, accept length about 1.0. Fix: --speculative-algorithm EAGLE3."
        )
