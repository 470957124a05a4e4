"""Exceptions raised by the plugin, with the refusal messages they carry. Pure module.

A message names what was wrong, what SGLang would have done silently, and the fix. The startup
rules (:mod:`sglang_eagle3_embed.core.rules.table`) report the same refusals before any GPU work; the
model glue raises them at load time, for launches that bypass the launcher's validation. The helpers
every refusal uses live here too: :func:`flag` (a field's launch flag), :func:`shown` (a user's
value, cut) and :func:`positive_int` (what counts as a count in a JSON config).
"""

from __future__ import annotations

from sglang_eagle3_embed import FAMILY, MODEL_IMPL
from sglang_eagle3_embed.core.rule_ids import PIPELINE_PARALLEL, TARGET_NOT_DEEPSEEK, TWO_BATCH_OVERLAP

__all__ = [
    "DraftConfigError",
    "Eagle3EmbedError",
    "InputError",
    "PluginInactiveError",
    "RuleError",
    "UnsupportedModeError",
    "ValidationError",
    "flag",
    "positive_int",
    "shown",
]

SHOWN = 100
"""About how many characters of a user's value a message repeats."""


def flag(field: str) -> str:
    """The launch flag of a ServerArgs field, as SGLang's parser spells it:
    ``speculative_eagle_topk`` -> ``--speculative-eagle-topk``."""
    return "--" + field.replace("_", "-")


def positive_int(value) -> bool:
    """A JSON integer above 0 (a JSON ``true`` is not one, though Python counts it as 1)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def shown(value: object, limit: int = SHOWN) -> str:
    """``repr(value)`` for a message, cut to about ``limit`` characters: a long list or tuple shows
    its first entries and its length, a long scalar its start and its length."""
    if isinstance(value, (list, tuple)):
        parts, size = [], 2
        for item in value:
            part = shown(item, limit)
            if size + len(part) > limit and parts:
                return f"[{', '.join(parts)}, ... ({len(value)} entries)]"
            parts.append(part)
            size += len(part) + 2
        return f"[{', '.join(parts)}]"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class Eagle3EmbedError(RuntimeError):
    """Base class: every message names what was wrong and how to fix it."""


class RuleError(Eagle3EmbedError):
    """A refusal that one validation rule reports: ``rule`` is its id (a constant of
    ``core/rule_ids.py``, a section of ``docs/validation.md``), given where the error is raised, so
    that what examines the error reads ``rule`` rather than its message."""

    def __init__(self, message: str, rule: str):
        super().__init__(message)
        self.rule = rule

    def __reduce__(self):
        return type(self), (*self.args, self.rule)


class DraftConfigError(RuleError, ValueError):
    """The draft's ``config.json`` does not say unambiguously which tensors it reads."""


class ValidationError(Eagle3EmbedError):
    """The startup validator found errors; the message lists them with their fixes."""

    def __init__(self, findings):
        self.findings = list(findings)
        lines = [f"[{f.rule}] {f.message}" for f in self.findings]
        super().__init__(
            "sglang_eagle3_embed refused this launch before any GPU work:\n  " + "\n  ".join(lines)
        )


class UnsupportedModeError(RuleError):
    """A target, parallel or scheduling mode that cannot deliver the captures the draft needs."""

    @classmethod
    def not_deepseek(cls, arch: str | None, reading: str = "not modelled") -> UnsupportedModeError:
        """The plugin asked for on a target outside the DeepSeek family; ``reading``: how stock
        SGLang's own model of ``arch`` reads the ids (``core/capture/stock_sglang.py``)."""
        own = {
            "add-one": "adds 1 to every id, so -1 already means the embedding output there",
            "first-id": (
                "reads the ids with the DeepSeek family's first-id heuristic, without the plugin: write "
                "capture indices there (0 = the embedding output, k = the output of layer k-1), e.g. "
                "[0, a+1, b+1] for [-1, a, b]"
            ),
            "none": "has no EAGLE-3 capture in SGLang (no set_eagle3_layers_to_capture): it serves no EAGLE-3 draft",
        }.get(reading, "reads the ids its own way (its set_eagle3_layers_to_capture)")
        return cls(
            f"--model-impl {MODEL_IMPL} serves the DeepSeek family ({', '.join(FAMILY)}), but the "
            f"target resolves to {arch}. SGLang's own {arch} {own}. Fix: drop --model-impl {MODEL_IMPL}.",
            rule=TARGET_NOT_DEEPSEEK,
        )

    @classmethod
    def pipeline_parallel(cls, pp_size: int, what: str) -> UnsupportedModeError:
        return cls(
            f"--pp-size {pp_size} with {what}: the embedding output and early layers live on the "
            f"first pipeline stage but SGLang captures aux hidden states on the last stage "
            f"only (srt/models/deepseek_v2.py:3459-3460). Fix: use --tp-size (and DP attention) "
            f"instead of --pp-size.",
            rule=PIPELINE_PARALLEL,
        )

    @classmethod
    def two_batch_overlap(cls, what: str) -> UnsupportedModeError:
        return cls(
            f"--enable-two-batch-overlap with {what}: SGLang runs the layers after "
            f"first_k_dense_replace through model_forward_stages, which has no capture point "
            f"(srt/models/deepseek_v2.py:3163-3172, 3202-3210), so aux hidden states would be "
            f"missing on overlapped batches. Fix: drop --enable-two-batch-overlap.",
            rule=TWO_BATCH_OVERLAP,
        )


class InputError(Eagle3EmbedError, ValueError):
    """Input a user can get wrong for a command (a missing or damaged file, an impossible flag):
    the message names the path or flag and what to do. The command line exits 2 on it."""


class PluginInactiveError(Eagle3EmbedError):
    """``--model-impl sglang_eagle3_embed`` was requested but the plugin could not activate."""
