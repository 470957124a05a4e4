"""EAGLE-3 under PD disaggregation: what each side feeds the draft, what the other side must pass.
Pure module.

In SGLang 0.5.23 a prefill server (``--disaggregation-mode prefill``) runs the target over the
prompt with aux capture, then the draft's first step over the whole prompt
(``srt/speculative/eagle_worker_v2.py:1548-1602``), and sends the decode server the draft's prompt
KV cache, its first proposal and its last hidden state (``srt/disaggregation/prefill.py:301-317,
939-950, 1033-1047``); the target's aux hidden states never cross the wire. The decode server's
target captures them again in every forward, each verify of every generated token included
(``srt/models/deepseek_v2.py:3175-3197, 3417-3423``). The
handshake compares page size and KV-cache dtype (``srt/disaggregation/common/conn.py:1320-1335``)
but carries no capture plan (1584-1611): each side feeds the draft what its own ``--model-impl``
captures. ``docs/pd.md`` has the whole matrix.

:func:`capture_of` answers what one side feeds the draft (the plugin's
:func:`~sglang_eagle3_embed.core.capture.draft_config.resolve_capture_plan`, or stock SGLang's reading from
:mod:`~sglang_eagle3_embed.core.capture.stock_sglang`); the ``pd-peer`` rule (``core/rules/pd.py``) and
the two-sided ``check`` (``core/rules/pair.py``) both ask it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.capture.draft_config import TOP_LEVEL, CapturePlan
from sglang_eagle3_embed.core.capture.ids import describe_capture_indices
from sglang_eagle3_embed.core.capture.stock_sglang import reading_of, stock_reading
from sglang_eagle3_embed.core.errors import DraftConfigError, flag
from sglang_eagle3_embed.core.findings import NotChecked
from sglang_eagle3_embed.core.readers.deployment import Deployment

__all__ = [
    "MODES",
    "PEER",
    "SPEC_TRIPLE",
    "Capture",
    "capture_of",
    "flag",
    "id_form",
    "pd_mode",
    "peer_flags",
]

MODES = ("prefill", "decode")
PEER = {"prefill": "decode", "decode": "prefill"}
SPEC_TRIPLE = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


def pd_mode(d: Deployment) -> str | None:
    """``prefill`` or ``decode`` for a PD-disaggregated launch, else None (``null``: unified)."""
    mode = d.value("disaggregation_mode")
    return mode if mode in MODES else None


@dataclass(frozen=True)
class Capture:
    """What one side's target feeds the draft's fc."""

    reader: str
    """``the plugin`` or ``stock SGLang``."""
    indices: tuple[int, ...] | None
    """The capture indices the draft reads, in the order it reads them; None: this side does not
    serve the draft (:attr:`outcome` says what happens instead)."""
    outcome: str
    """Plain words: ``reads [...]``, or stock SGLang's outcome (``fails at startup: ...``)."""

    def describe(self) -> str:
        return describe_capture_indices(self.indices) if self.indices is not None else "nothing"


def capture_of(d: Deployment, plugin: bool | None = None) -> Capture | NotChecked | None:
    """What ``d``'s target feeds the draft, served by the plugin (``plugin``: True) or by stock
    SGLang (False); None (default) as ``d`` asks (``--model-impl``). None for a launch that is
    not EAGLE-3; :class:`NotChecked` when the draft's capture plan cannot be made (other rules say
    why) or stock SGLang's reading of the target is not modelled."""
    if not d.eagle3:
        return None
    if isinstance(d.capture, DraftConfigError):
        return NotChecked(f"the draft's capture plan stopped at [{d.capture.rule}]")
    if not isinstance(d.capture, CapturePlan):
        return NotChecked(d.no_capture or "no capture plan")
    plan = d.capture
    if d.plugin_requested if plugin is None else plugin:
        return Capture("the plugin", plan.indices, f"reads [{plan.describe()}]")
    if reading_of(d.target_arch) == "not modelled":
        return NotChecked(f"stock SGLang's reading of {d.target_arch} is not modelled")
    stock = stock_reading(d.draft, d.target_text["num_hidden_layers"], d.target_arch)
    return Capture("stock SGLang", stock.indices, stock.outcome)


def id_form(plan: CapturePlan) -> str:
    """Where the draft's ids are and how they are read: ``ids [-1, 2, 4] in eagle_config``."""
    if plan.ids is None:
        return "no ids"
    where = "at the top level of its config" if plan.source == TOP_LEVEL else f"in {plan.source}"
    return f"ids {list(plan.ids)} {where}, convention {plan.convention.value}"


def peer_flags(d: Deployment) -> str:
    """The flags the other side of ``d`` must pass for the draft to read the same tensors there:
    the plugin, the same draft and revision, the same speculative settings (as SGLang resolved
    them on this side)."""
    parts = [
        f"--model-impl {MODEL_IMPL}",
        "--speculative-algorithm EAGLE3",
        f"--speculative-draft-model-path {d.raw.get('speculative_draft_model_path')}",
    ]
    revision = d.raw.get("speculative_draft_model_revision")
    if revision:
        parts.append(f"--speculative-draft-model-revision {revision}")
    parts += [f"{flag(name)} {d.value(name)}" for name in SPEC_TRIPLE if d.value(name) is not None]
    return " ".join(parts)
