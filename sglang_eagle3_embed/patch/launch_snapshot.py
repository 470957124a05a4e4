"""The launch snapshot: what the startup validator and ``sglang-eagle3-embed check`` read of a launch
(docs/patches.md §6).

:func:`snapshot` turns SGLang's ``ServerArgs`` (before or after its resolution) into a
:class:`~sglang_eagle3_embed.core.readers.deployment.Deployment`: the flags the user passed and what SGLang
resolved, both models' configs found and built as SGLang builds them, and what the rules read of
their weights' headers. The launcher imports it only for a launch that asks for the plugin
(:mod:`sglang_eagle3_embed.patch.speculative_validation`); ``check`` imports it on any command line.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

from sglang_eagle3_embed.core.readers import coverage, hub, model_folder
from sglang_eagle3_embed.core.readers.deployment import WATCHED, Deployment
from sglang_eagle3_embed.core.readers.hub import HubError
from sglang_eagle3_embed.core.readers.model_folder import ModelFolderError
from sglang_eagle3_embed.core.readers.overrides import apply_overrides, parse_overrides

__all__ = ["draft_weights", "locate", "read_config", "read_models", "snapshot", "target_weights"]


def locate(path: str | None, revision: str | None, download_dir: str | None, what: str, fetch: bool = False):
    """``(folder, None)``: the local folder of a model path, a local folder or the cached snapshot
    of a hub id (:func:`~sglang_eagle3_embed.core.readers.hub.locate`, as SGLang finds it); ``(None, None)``
    without a path; ``(None, why not)`` for a hub id the cache does not hold. With ``fetch`` (a
    launch, online), a hub id that is not cached has its configs downloaded, as SGLang downloads
    them next (``srt/model_loader/weight_utils.py:326-337``); its weights come later, with SGLang's."""
    if not path:
        return None, None
    try:
        return hub.locate(path, revision, download_dir, what), None
    except HubError as exc:
        if not fetch or hub.offline():
            return None, str(exc)
    try:
        from huggingface_hub import snapshot_download

        return Path(
            snapshot_download(path, revision=revision, allow_patterns="*.json", cache_dir=download_dir)
        ), None
    except Exception as exc:  # no such repo, no network: SGLang fails on it next, with its own message
        return None, f"{what} {path}: {type(exc).__name__}: {exc}"


def read_config(folder, config_file: str | None = None) -> tuple[dict | None, str | None]:
    """The config of a model ``folder`` as a JSON object: its ``config.json``, or the file that
    ``--decrypted-config-file`` names (relative to the folder, or absolute, as transformers reads
    it). ``(config, None)``, or ``(None, why not)``: a missing or damaged file, or JSON that is not
    an object (the file and what is wrong with it)."""
    try:
        if config_file and config_file.strip():
            file = folder / config_file.strip()
        else:
            file = model_folder.config_file(folder, folder_only=True)
        config = model_folder.read_json(file)
    except ModelFolderError as exc:
        return None, exc.reason
    if not isinstance(config, dict):
        return None, f"{file}: is not a JSON object but a {type(config).__name__}"
    return config, None


def _gguf(path: str | None) -> bool:
    """A GGUF file as the model path: SGLang reads its config from the file itself (a FIFO or a
    folder is never opened)."""
    try:
        if not path or not stat.S_ISREG(os.stat(path).st_mode):
            return False
        if path.endswith(".gguf"):
            return True
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except (OSError, ValueError):
        return False


def _tensor_names(folder) -> tuple[list[str], tuple[str, ...]]:
    """The tensor names of ``folder``'s weights from their safetensors headers (no tensor is read)
    and the weight files (none: a folder without ``*.safetensors``, such as a cached snapshot whose
    configs alone were downloaded). Raises :class:`ModelFolderError` for a damaged checkpoint."""
    files = model_folder.weight_files(folder)
    return [n for f in files for n in model_folder.safetensors_header(f)], tuple(str(f) for f in files)


def draft_weights(folder) -> dict:
    """What the rules read of the draft's weights, from their headers: the fc's input width, the
    decoder layers held and the files read, or why they cannot be read (a damaged checkpoint)."""
    try:
        names, files = _tensor_names(folder)
        fc = model_folder.fc_in_features(folder)
    except ModelFolderError as exc:
        return {"draft_weights_error": exc.reason}
    if not files:  # SGLang may load other formats (*.bin): nothing read, nothing judged
        return {}
    return {
        "draft_fc_in_features": fc,
        "draft_weight_files": files,
        "draft_layers": coverage.draft_layers(names),
    }


def target_weights(folder, config) -> dict:
    """The decoder layers (and their modules) that the target's weights hold, from their headers,
    or why they were not read."""
    try:
        names, files = _tensor_names(folder)
    except ModelFolderError as exc:
        return {"target_weights_error": exc.reason}
    if not files:
        return {"target_weights_error": f"{folder} holds no *.safetensors weights"}
    return {"target_layers": model_folder.decoder_layers(names, model_folder.layer_prefixes(config))}


def snapshot(
    server_args,
    *,
    resolved: bool,
    plugin_active: bool,
    plugin_reason: str = "",
    fetch: bool = False,
) -> Deployment:
    """A :class:`Deployment` of ``server_args`` (``resolved``: after SGLang's resolution): both
    models found as SGLang finds them (a local folder, or a hub id's cached snapshot at
    ``--revision`` / ``--speculative-draft-model-revision``, under ``--download-dir``), their
    configs as SGLang builds them (``--decrypted-config-file`` and
    ``--decrypted-draft-config-file``, then ``--json-model-override-args`` on both), and what the
    rules read of their weights' headers. ``fetch``: at launch, download a hub id's configs that the
    cache lacks, as SGLang would (``check`` never downloads)."""
    import msgspec
    from sglang.srt.arg_groups.overrides import resolution_result

    def arg(name: str):
        return getattr(server_args, name, None)

    defaults = {f.name: f.default for f in msgspec.structs.fields(type(server_args))}
    raw_input = getattr(server_args, "_raw_input", None) or {}
    raw = {n: raw_input.get(n, getattr(server_args, n, None)) for n in WATCHED}
    draft_path = raw["speculative_draft_model_path"]
    overrides = parse_overrides(raw["json_model_override_args"])
    download_dir = arg("download_dir")
    target_folder, target_error = (
        (None, None)
        if _gguf(server_args.model_path)
        else locate(server_args.model_path, arg("revision"), download_dir, "--model-path", fetch)
    )
    draft_folder, draft_error = locate(
        draft_path,
        arg("speculative_draft_model_revision"),
        download_dir,
        "--speculative-draft-model-path",
        fetch,
    )
    return read_models(
        target_folder,
        draft_folder,
        raw,
        overrides=overrides,
        config_files=(arg("decrypted_config_file"), arg("decrypted_draft_config_file")),
        errors=(target_error, draft_error),
        explicit=frozenset(n for n in WATCHED if raw[n] != defaults.get(n)),
        resolved={n: resolution_result(server_args, n) for n in WATCHED} if resolved else {},
        plugin_active=plugin_active,
        plugin_reason=plugin_reason,
    )


def read_models(
    target_folder,
    draft_folder,
    raw: dict,
    *,
    overrides: dict | None = None,
    config_files: tuple = (None, None),
    errors: tuple = (None, None),
    **fields,
) -> Deployment:
    """The one reading of a (target, draft) pair of model folders that every rule reads: the
    launch ``raw`` of them, both configs as SGLang builds them (``config_files``: the decrypted
    config files, relative to the folders; ``overrides`` applied to both), and what the rules read
    of their weights' headers. A folder that is None was not found (``errors``: why). ``check``,
    the launch validator, ``probe`` and the property sweep all read a pair this way."""
    overrides = {} if overrides is None else overrides
    target_error, draft_error = errors
    target = draft = None
    if target_folder is not None:
        target, target_error = read_config(target_folder, config_files[0])
    if draft_folder is not None:
        draft, draft_error = read_config(draft_folder, config_files[1])
    deployment = Deployment(
        raw=raw,
        target=apply_overrides(target, overrides),
        target_error=target_error,
        draft=apply_overrides(draft, overrides),
        draft_error=draft_error,
        overrides=overrides,
        **fields,
        **(draft_weights(draft_folder) if draft is not None else {}),
    )
    if target is None or not deployment.reads_target_weights:
        return deployment
    return dataclasses.replace(deployment, **target_weights(target_folder, deployment.target))
