"""The DeepSeek model body, re-classed to check and order the captures (docs/patches.md §5).

The capture itself stays SGLang's: ``DeepseekV2Model.forward`` captures the input of every layer
index in ``layers_to_capture`` through the layer boundary (``srt/models/deepseek_v2.py:3175-3197``,
``srt/layers/layer_boundary/stage.py:463-480``), and index 0 is the embedding output. It lives in
the model body, which every execution path runs: eager, decode CUDA graph, the breakable prefill
CUDA graph and context-parallel prefill all call ``DeepseekV2Model.forward``
(``srt/model_executor/runner/prefill_cuda_graph_runner.py:181-203``,
``srt/model_executor/runner/eager_runner.py:397``). ``AuxHiddenStatePacker`` copies each capture
into its own buffer (``srt/layers/aux_hidden_states.py:70-71``), so the embedding is never an alias
of a residual that a later layer updates in place.

What the plugin adds: the right indices (from :mod:`sglang_eagle3_embed.core.capture.draft_config`), the order
the draft was trained with (the packer fills blocks in ascending layer order), a width check, and a
clear refusal of the modes that cannot deliver the captures.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import torch
from sglang.srt.models.deepseek_v2 import DeepseekV2ForCausalLM, DeepseekV2Model

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.capture.draft_config import CapturePlan, fc_width, resolve_capture_plan
from sglang_eagle3_embed.core.capture.ids import describe_capture_indices
from sglang_eagle3_embed.core.errors import UnsupportedModeError

__all__ = [
    "Eagle3EmbedDeepseekV2Model",
    "apply_plan",
    "arrange_captures",
    "configure",
    "install",
    "refuse_unsupported_modes",
    "runtime_draft_config",
]

logger = logging.getLogger("sglang_eagle3_embed")


def arrange_captures(aux: torch.Tensor, model: DeepseekV2Model) -> torch.Tensor:
    """Check the packed captures' width and put the blocks in the draft's order."""
    hidden = model.config.hidden_size
    count = len(model.layers_to_capture)
    if aux.shape[-1] != fc_width(count, hidden):
        raise RuntimeError(
            f"sglang_eagle3_embed: the target captured aux hidden states of width {aux.shape[-1]}, "
            f"expected {count} x hidden {hidden} = {fc_width(count, hidden)} for "
            f"[{describe_capture_indices(model.layers_to_capture)}]; refusing to pass a "
            f"misshapen tensor to the draft."
        )
    order = getattr(model, "eagle3_embed_block_order", None)
    if order is None:
        return aux
    return torch.cat([aux[..., b * hidden : (b + 1) * hidden] for b in order], dim=-1)


class Eagle3EmbedDeepseekV2Model(DeepseekV2Model):
    """SGLang's ``DeepseekV2Model`` with captures checked and handed over in the draft's order.

    Adds no state: :func:`install` re-classes an already-built stock model body.
    """

    eagle3_embed_block_order: tuple[int, ...] | None = None

    # Same signature as SGLang's: the prefill CUDA-graph runner binds input_embeds and
    # pp_proxy_tensors by name (srt/model_executor/runner/prefill_cuda_graph_runner.py:210,684).
    def forward(self, input_ids, positions, forward_batch, input_embeds=None, pp_proxy_tensors=None):
        out = super().forward(input_ids, positions, forward_batch, input_embeds, pp_proxy_tensors)
        if not isinstance(out, tuple):
            return out
        hidden_states, aux = out
        return hidden_states, arrange_captures(aux, self)


def refuse_unsupported_modes() -> None:
    """Raise for parallel modes in which SGLang 0.5.23 cannot deliver every capture."""
    from sglang.srt.runtime_context import get_exec, get_parallel

    what = f"--model-impl {MODEL_IMPL}"
    if get_parallel().pp_size > 1:
        raise UnsupportedModeError.pipeline_parallel(get_parallel().pp_size, what)
    if get_exec().overlap.enable_two_batch_overlap:
        raise UnsupportedModeError.two_batch_overlap(what)


def install(causal_lm: DeepseekV2ForCausalLM) -> None:
    """Refuse unsupported modes, then give ``causal_lm``'s body the ordered, checked capture.

    Runs once per model, in the constructor of the plugin's classes
    (:mod:`sglang_eagle3_embed.patch.deepseek_models`); :func:`apply_plan` only checks it ran."""
    refuse_unsupported_modes()
    body = causal_lm.model
    if type(body) is DeepseekV2Model:
        body.__class__ = Eagle3EmbedDeepseekV2Model
    elif not isinstance(body, Eagle3EmbedDeepseekV2Model):
        raise TypeError(f"sglang_eagle3_embed: unexpected model body {type(body).__name__}")


def runtime_draft_config() -> dict | None:
    """The EAGLE-3 draft's config as SGLang reads it in this launch, or None without one."""
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.runtime_context import get_server_args, get_spec
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    spec = get_spec()
    algorithm = SpeculativeAlgorithm.from_string(spec.speculative_algorithm)
    if not algorithm.is_eagle3() or not spec.speculative_draft_model_path:
        return None
    draft = ModelConfig.from_server_args(
        get_server_args(),
        model_path=spec.speculative_draft_model_path,
        model_revision=spec.speculative_draft_model_revision,
        is_draft_model=True,
    )
    return draft.hf_config.to_dict()


def apply_plan(causal_lm: DeepseekV2ForCausalLM, plan: CapturePlan) -> None:
    """Point ``causal_lm``'s capture at ``plan`` (before CUDA-graph capture, as SGLang does).

    ``causal_lm`` is built by one of the plugin's classes, whose constructor ran :func:`install`."""
    if not isinstance(causal_lm.model, Eagle3EmbedDeepseekV2Model):
        raise TypeError(
            f"sglang_eagle3_embed: the capture is not installed on {type(causal_lm).__name__}: build it "
            f"with a class of sglang_eagle3_embed.patch.deepseek_models"
        )
    causal_lm.capture_aux_hidden_states = True
    causal_lm.model.layers_to_capture = plan.layers_to_capture
    causal_lm.model.eagle3_embed_block_order = plan.block_order if plan.needs_reorder else None


def configure(
    causal_lm: DeepseekV2ForCausalLM, stock_ids, draft_config: Mapping | None = None
) -> CapturePlan | None:
    """The plugin's ``set_eagle3_layers_to_capture``: ``stock_ids`` is what SGLang hands it.

    Without an EAGLE-3 draft (capture-only mode) they are used as SGLang would use them.
    """
    # Why the draft config is read again (SGLang 0.5.23): ``stock_ids`` are complete only without an
    # EAGLE-3 draft, where they are the --return-aux-hidden-state-layer-ids (or None) and there is no
    # draft config (srt/model_executor/model_runner_components/spec_aux_hidden_state.py:84-106).
    # With one, SGLang hands only eagle_config["eagle_aux_hidden_state_layer_ids"], -1 intact, or None
    # (spec_aux_hidden_state.py:185-196, passed unchanged by attention_backend_setup.py:54-61 from
    # model_runner.py:1109-1116): None both for top-level ids and for a malformed eagle_config (its
    # ``except Exception``, :195-196), and never the declared convention, num_aux_hidden_states (the
    # width the draft's fc reads, srt/models/llama_eagle3.py:156-161) or a disagreeing second list,
    # which resolve_capture_plan needs in every EAGLE-3 case. SGLang's own reading of the draft
    # (spec_aux_hidden_state.py:150-155, kept at :166) stays on the model runner, which the model
    # never sees, so runtime_draft_config repeats that call with the same arguments.
    if draft_config is None:
        draft_config = runtime_draft_config()
    if draft_config is None:
        DeepseekV2ForCausalLM.set_eagle3_layers_to_capture(causal_lm, stock_ids)
        causal_lm.model.eagle3_embed_block_order = None
        logger.info(
            "sglang_eagle3_embed: no EAGLE-3 draft in this launch; capturing SGLang's reading of %s: [%s]",
            stock_ids,
            describe_capture_indices(causal_lm.model.layers_to_capture),
        )
        return None
    plan = resolve_capture_plan(draft_config, causal_lm.config.num_hidden_layers)
    for warning in plan.warnings:
        logger.warning("sglang_eagle3_embed: [%s] %s", warning.rule, warning.message)
    logger.info(plan.log_line())
    apply_plan(causal_lm, plan)
    return plan
