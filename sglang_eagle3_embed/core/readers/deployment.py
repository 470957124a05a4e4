"""A launch as plain data: what the startup rules read. Pure module.

:class:`Deployment` holds the watched ``ServerArgs`` fields as the user passed them and as SGLang
resolved them, the target's and the draft's configs, and the plugin's activation state. The glue
(``patch/launch_snapshot.py``) builds it from SGLang's objects; the rules and the tests
build it from dictionaries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from sglang_eagle3_embed import FAMILY, MODEL_IMPL
from sglang_eagle3_embed.core.capture.draft_config import CapturePlan, resolve_capture_plan
from sglang_eagle3_embed.core.errors import DraftConfigError
from sglang_eagle3_embed.core.readers.model_folder import text_config
from sglang_eagle3_embed.core.readers.overrides import overridden

__all__ = ["EAGLE_FAMILY", "WATCHED", "Deployment", "text_config"]

EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")


WATCHED = (
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_draft_model_revision",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_adaptive",
    "max_running_requests",
    "cuda_graph_max_bs_decode",
    "page_size",
    "pp_size",
    "enable_two_batch_overlap",
    "json_model_override_args",
    "model_impl",
    "enable_return_aux_hidden_states",
    "disaggregation_mode",
)
"""The ServerArgs fields the rules read."""


@dataclass(frozen=True)
class Deployment:
    """Everything the rules read, as plain data (built by ``patch.launch_snapshot.snapshot``)."""

    raw: Mapping[str, object]
    """Every watched field as the user gave it (defaults included)."""
    explicit: frozenset[str] = frozenset()
    """Fields the user set to a non-default value."""
    resolved: Mapping[str, object] = field(default_factory=dict)
    """Fields after SGLang's resolution (empty in the ``pre`` stage)."""
    target: Mapping | None = None
    """The target's config as SGLang builds it: its config file with ``--json-model-override-args``
    applied (:mod:`sglang_eagle3_embed.core.readers.overrides`)."""
    target_error: str | None = None
    """Why the target's config.json could not be read as a JSON object (None when it was)."""
    draft: Mapping | None = None
    """The draft's config as SGLang builds it, overrides applied as to the target's."""
    draft_error: str | None = None
    """Why the draft's config.json could not be read (None when it was, or when there is no draft)."""
    overrides: Mapping = field(default_factory=dict)
    """``--json-model-override-args`` as an object: applied to both configs above."""
    draft_fc_in_features: int | None = None
    """The draft fc's input width from its local weights' headers (None when not known)."""
    draft_weights_error: str | None = None
    """Why the draft's local weights could not be read (a damaged or incomplete checkpoint)."""
    draft_weight_files: tuple[str, ...] = ()
    """The draft's weight files whose headers were read (empty: none to read)."""
    draft_layers: frozenset[int] | None = None
    """The decoder layers the draft's weights hold (``coverage.draft_layers``; None: not read)."""
    target_layers: Mapping[int, frozenset[str]] | None = None
    """The decoder layers the target's weights' headers hold, with each one's modules
    (``model_folder.decoder_layers``); read for speculative launches (:attr:`reads_target_weights`),
    else None, as when they cannot be read (:attr:`target_weights_error` says why)."""
    target_weights_error: str | None = None
    """Why the target's weights were not read where a rule needs them (a folder or cached snapshot
    without ``*.safetensors``, a damaged header)."""
    plugin_active: bool = True
    plugin_reason: str = ""

    def value(self, name: str):
        return self.resolved.get(name, self.raw.get(name))

    @property
    def capture_only(self) -> bool:
        """``--enable-return-aux-hidden-states``: ``--speculative-algorithm`` only names the capture
        convention and SGLang resets it to None (srt/arg_groups/validation_hook.py:697-752)."""
        return bool(self.raw.get("enable_return_aux_hidden_states"))

    @property
    def algorithm(self) -> str:
        """The speculative algorithm that will run ("" for none, and in capture-only mode)."""
        if self.capture_only:
            return ""
        return str(self.raw.get("speculative_algorithm") or "").upper()

    @property
    def eagle3(self) -> bool:
        return self.algorithm == "EAGLE3"

    @property
    def drafts_from_target(self) -> bool:
        """EAGLE (NEXTN resolves to it) without a draft path: SGLang loads the target's own MTP
        layer as the draft."""
        return self.algorithm in ("EAGLE", "NEXTN") and not self.raw.get("speculative_draft_model_path")

    @property
    def reads_target_weights(self) -> bool:
        """The rules read the target's weights: which layers it holds (EAGLE-3, and EAGLE with the
        target's own MTP layer as the draft)."""
        return self.eagle3 or self.drafts_from_target

    def overridden(self, key: str, nested: str | None = None) -> str:
        """`` (set by --json-model-override-args)`` when the overrides set ``key`` (at the top level
        or in sub-config ``nested``), for a message; else empty."""
        return " (set by --json-model-override-args)" if overridden(self.overrides, key, nested) else ""

    @property
    def draft_fields(self) -> Mapping:
        """The draft config's fields ({} when there is none, or when it is not a JSON object)."""
        return self.draft if isinstance(self.draft, Mapping) else {}

    @property
    def target_text(self) -> Mapping:
        """The target's text config (:func:`text_config`)."""
        return text_config(self.target or {})

    @property
    def target_arch(self) -> str | None:
        archs = (self.target or {}).get("architectures") or [None]
        return archs[0] if isinstance(archs, list) else None

    @property
    def target_archs_malformed(self) -> bool:
        """The target config's ``architectures`` is not a non-empty list of class names."""
        archs = (self.target or {}).get("architectures")
        return not (isinstance(archs, list) and archs and all(isinstance(a, str) for a in archs))

    @property
    def family(self) -> bool:
        return self.target_arch in FAMILY

    @property
    def plugin_requested(self) -> bool:
        return self.raw.get("model_impl") == MODEL_IMPL

    @cached_property
    def capture(self) -> CapturePlan | DraftConfigError | None:
        """The draft's capture plan for this target, the error that prevents one, or None when
        there is no draft config or no target config to plan from (:attr:`no_capture` says which).
        Computed once per deployment."""
        if self.no_capture:
            return None
        try:
            return resolve_capture_plan(self.draft, self.target_text.get("num_hidden_layers"))
        except DraftConfigError as err:
            return err

    @property
    def no_capture(self) -> str | None:
        """Why there is nothing to plan from, or None."""
        if self.draft is None:
            return "no draft config was read"
        if self.target is None:
            why = f" ({self.target_error})" if self.target_error else ""
            return f"the target's config.json was not read{why}"
        return None
