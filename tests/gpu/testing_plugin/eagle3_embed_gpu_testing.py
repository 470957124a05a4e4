"""Test-only SGLang hooks for the GPU tests, switched on per engine with the environment variable
``EAGLE3_EMBED_GPU_TESTING`` (a comma-separated list; SGLang's processes inherit it). Nothing here is
part of the product: it is installed on the GPU test machine only (``tools/gpu_bundle.sh``).

``align-attention``
    Plain decoding computes attention with SGLang's two-stage triton decode kernel, which walks the
    keys in tiles of 32 (``kernels/ops/attention/decode_attention.py:818``); the speculative verify
    pass uses the one-stage unified extend kernel, in tiles of 64 on Hopper
    (``kernels/ops/attention/extend_attention.py:111-118``), with a custom tree mask. Their softmax
    sums round differently once a request attends more than 32 keys. This switch runs the target's
    MLA decode through the unified kernel (one query, causal) and drops the verify pass's tree mask
    where it is a chain (top-k 1, where it equals the causal mask), so that both passes reduce in
    the same order at every length.

``keep-aux``
    A planted leak: every verify pass's aux hidden states (what the draft reads next) are kept,
    with a 1 MiB block each, for the life of the process. The load tests' leak check must see it.

``perturb-verify``
    A planted defect: before SGLang decides which draft tokens to accept, the first row of the
    verify pass's logits prefers its second-best token (``eagle_utils.eagle_sample``, called outside
    any CUDA graph). The exact tests must catch it.
"""

from __future__ import annotations

import os

SWITCH = "EAGLE3_EMBED_GPU_TESTING"
DECODE = "sglang.kernels.ops.attention.decode_attention.decode_attention_fwd"
EXTEND_UNIFIED = "sglang.srt.layers.attention.triton_backend.TritonAttnBackend._forward_extend_unified"
VERIFY = "sglang.srt.speculative.eagle_utils.eagle_sample"


def _decode_as_extend(original, q, k_buffer, v_buffer, o, kv_indptr, kv_indices, *args, **kwargs):
    if not kwargs.get("has_mla"):
        return original(q, k_buffer, v_buffer, o, kv_indptr, kv_indices, *args, **kwargs)
    import torch
    from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd_unified

    # after kv_indices: attn_logits, attn_lse, num_kv_splits, max_kv_splits, sm_scale, k_scale, v_scale
    sm_scale, k_scale, v_scale = args[4], args[5], args[6]
    batch = q.shape[0]
    indptr = kv_indptr[: batch + 1]
    prefix = (indptr[1:] - indptr[:-1] - 1).to(torch.int32)  # the current token is the one query
    extend_attention_fwd_unified(
        q, o, k_buffer, v_buffer, k_scale, v_scale,
        torch.arange(batch + 1, dtype=torch.int64, device=q.device), indptr, kv_indices, prefix, 1,
        sm_scale=sm_scale, logit_cap=kwargs.get("logit_cap", 0.0), is_causal=True,
        page_size=kwargs.get("page_size", 1),
    )  # fmt: skip
    return o


def _verify_without_chain_mask(original, self, q, o, layer, forward_batch, *args, **kwargs):
    meta = self.forward_metadata
    if not (
        forward_batch.forward_mode.is_target_verify() and self.topk == 1 and meta.custom_mask is not None
    ):
        return original(self, q, o, layer, forward_batch, *args, **kwargs)
    mask = meta.custom_mask
    meta.custom_mask = None
    try:
        return original(self, q, o, layer, forward_batch, *args, **kwargs)
    finally:
        meta.custom_mask = mask


def _perturbed_verify(original, verify_input, batch, logits_output, *args, **kwargs):
    logits = logits_output.next_token_logits
    if logits is not None and logits.shape[0] > 0:
        first, second = logits[0].topk(2).indices.tolist()
        logits[0, second] = logits[0, first] + 1.0
    return original(verify_input, batch, logits_output, *args, **kwargs)


_KEPT = []


def _kept_aux(original, verify_input, batch, logits_output, *args, **kwargs):
    import torch

    hidden = logits_output.hidden_states
    block = torch.empty(1 << 20, dtype=torch.uint8, device=logits_output.next_token_logits.device)
    _KEPT.append((None if hidden is None else hidden.clone(), block))
    return original(verify_input, batch, logits_output, *args, **kwargs)


SWITCHES = {
    "align-attention": ((DECODE, _decode_as_extend), (EXTEND_UNIFIED, _verify_without_chain_mask)),
    "perturb-verify": ((VERIFY, _perturbed_verify),),
    "keep-aux": ((VERIFY, _kept_aux),),
}
"""Each switch's AROUND hooks: (the SGLang symbol, the wrapper)."""


def register() -> None:
    switches = {s.strip() for s in os.environ.get(SWITCH, "").split(",") if s.strip()}
    unknown = switches - SWITCHES.keys()
    if unknown:
        raise ValueError(f"{SWITCH}: unknown switches {sorted(unknown)}")
    if not switches:
        return
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    for name, hooks in SWITCHES.items():
        if name in switches:
            for target, hook in hooks:
                HookRegistry.register(target, hook, HookType.AROUND)
