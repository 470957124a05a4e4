"""The configs SGLang builds, not the files on disk: ``--json-model-override-args`` applied as
SGLang applies it. Pure module.

SGLang hands the same override object to the target's ``ModelConfig`` and to the draft's
(``srt/configs/model_config.py:962``, ``is_draft_model`` or not), and ``get_config`` applies it to
the config it read (``srt/utils/hf_transformers/config.py:405-425``): each key is set at the top
level, except that a JSON object given for a sub-config (Kimi-K2.5's ``text_config``,
``vision_config``) updates that sub-config, and one given for ``rope_scaling`` or
``rope_parameters`` is merged into it. Any other object (``eagle_config``, ``quantization_config``)
replaces the value whole. The config file itself can be another than ``config.json``
(``--decrypted-config-file``, ``--decrypted-draft-config-file``; ``srt/configs/model_config.py:950-954``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

__all__ = ["SUB_CONFIGS", "apply_overrides", "overridden", "override_error", "parse_overrides"]

SUB_CONFIGS = frozenset({"text_config", "vision_config"})
"""Keys that transformers builds as configs of their own (``PretrainedConfig``) in the composite
configs this plugin serves (``KimiK25Config``): an override object updates them."""
MERGED = frozenset({"rope_scaling", "rope_parameters"})


def _read(text: str):
    """``text`` as JSON: (the value, None), or (None, why it is not a JSON object)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, too many digits; too deep
        return None, f"is not JSON ({exc})"
    if not isinstance(value, dict):
        return None, f"is a JSON {type(value).__name__}, not an object"
    return value, None


def override_error(value) -> str | None:
    """What is wrong with ``--json-model-override-args`` ``value`` (the flag, the value, why, the
    fix), or None when it is empty or a JSON object."""
    if not isinstance(value, str) or not value.strip():
        return None
    problem = _read(value)[1]
    if problem is None:
        return None
    return (
        f"--json-model-override-args {value[:200]!r} {problem}. Fix: pass a JSON object of config "
        f"fields, e.g. '{{\"max_position_embeddings\": 4096}}'"
    )


def parse_overrides(value) -> dict:
    """``--json-model-override-args`` as a dict ({} when empty or not a JSON object: ``check``
    refuses such a value before any rule runs (:func:`override_error`), and SGLang fails on it at
    startup)."""
    if isinstance(value, Mapping):
        return dict(value)
    if not isinstance(value, str) or not value.strip():
        return {}
    return _read(value)[0] or {}


def apply_overrides(config, overrides: Mapping):
    """``config`` (a JSON object read from disk) as SGLang builds it with ``overrides``; anything
    that is not an object is returned as it is (the rules judge it)."""
    if not overrides or not isinstance(config, Mapping):
        return config
    result = dict(config)
    for key, value in overrides.items():
        current = result.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping) and key in SUB_CONFIGS | MERGED:
            result[key] = {**current, **value}
        else:
            result[key] = value
    return result


def overridden(overrides: Mapping, key: str, nested: str | None = None) -> bool:
    """Whether ``overrides`` sets ``key`` at the top level or (``nested``: ``text_config``) in that
    sub-config."""
    if key in overrides:
        return True
    inner = overrides.get(nested) if nested else None
    return isinstance(inner, Mapping) and key in inner
