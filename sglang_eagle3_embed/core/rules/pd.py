"""The startup rule on PD disaggregation: one side of a prefill/decode pair cannot see the other, so
it names what the other side must pass. Pure module; :mod:`sglang_eagle3_embed.core.rules.table` runs it,
and ``check --pd-peer`` compares both command lines (``core/rules/pair``)."""

from __future__ import annotations

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.capture.draft_config import CapturePlan
from sglang_eagle3_embed.core.findings import NotChecked
from sglang_eagle3_embed.core.pd.sides import PEER, Capture, capture_of, id_form, pd_mode, peer_flags
from sglang_eagle3_embed.core.readers.deployment import Deployment
from sglang_eagle3_embed.core.rule_ids import PD_PEER
from sglang_eagle3_embed.core.rules.registry import rule

WHY_STOCK_DIFFERS = {
    True: "stock SGLang reads ids only from eagle_config and captures its default layers",
    False: "stock SGLang ignores the declared convention and reads the ids with its first-id heuristic",
}
"""Why stock SGLang reads the draft's ids otherwise, by whether they are at the top level."""


def _without_plugin(mode: str, plan: CapturePlan, stock: Capture | NotChecked) -> str:
    """What the other side does with this draft when it runs without the plugin."""
    peer = PEER[mode]
    if isinstance(stock, NotChecked):
        return f"what a {peer} server without the plugin does with this draft is not known ({stock.why})"
    if stock.indices is None:
        return f"a {peer} server without the plugin {stock.outcome}"
    if list(stock.indices) == list(plan.indices):
        return (
            f"a {peer} server without the plugin captures the same tensors with this draft, so both "
            f"sides would feed it the same; pass the flags anyway, so that both sides validate the "
            f"launch and log what the draft reads"
        )
    why = WHY_STOCK_DIFFERS[plan.source == "top level"]
    if peer == "decode":
        return (
            f"a decode server without the plugin silently feeds the draft [{stock.describe()}] instead "
            f"for every generated token ({why}); only the prompt state this prefill sends is right"
        )
    return (
        f"a prefill server without the plugin silently builds the draft's prompt KV cache and first "
        f"proposal, which it sends here, from [{stock.describe()}] ({why}); this decode server then "
        f"drafts every token over that prompt state"
    )


@rule(PD_PEER)
def _pd_peer(d: Deployment):
    mode = pd_mode(d)
    if mode is None or not (d.eagle3 and d.family and d.plugin_requested):
        return
    peer = PEER[mode]
    head = (
        f"--disaggregation-mode {mode} with --model-impl {MODEL_IMPL}: SGLang's PD handshake carries no "
        f"capture plan, so nothing checks what the {peer} server feeds the draft. The {peer} server "
        f"must pass {peer_flags(d)} (a different --page-size or --kv-cache-dtype SGLang refuses itself "
        f"when the two connect)."
    )
    fix = (
        f"Fix: launch the {peer} server with those flags, and check both command lines together: "
        f"sglang-eagle3-embed check <these arguments> --pd-peer <the {peer} server's arguments>."
    )
    plan = d.capture
    if not isinstance(plan, CapturePlan):
        yield f"{head} What a {peer} server without the plugin does depends on the draft's ids (see the errors above). {fix}"
        return
    consequence = _without_plugin(mode, plan, capture_of(d, plugin=False))
    yield f"{head} The draft reads [{plan.describe()}] ({id_form(plan)}): {consequence}. {fix}"
