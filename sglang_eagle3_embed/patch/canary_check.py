"""The startup self-check's code (:mod:`sglang_eagle3_embed.patch.canary_warmup` registers it):
loaded in the HTTP server's process when the warmup runs, never by a process that only registers
it. It sends the recorded prompts through the tokenizer manager, pools the served accept lengths and
judges them (:mod:`sglang_eagle3_embed.core.canary.expectations`); ``SGLANG_EAGLE3_EMBED_CANARY_MODE``
``raise`` stops the server on a failed check, as SGLang stops it on a failed warmup
(``kill_process_tree``, ``srt/entrypoints/http_server.py:2531-2535``).
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING

from sglang_eagle3_embed import WARMUP

if TYPE_CHECKING:
    from sglang_eagle3_embed.core.canary.expectations import Expectations

__all__ = ["SIMULATE_ACC_LEN", "run"]

logger = logging.getLogger("sglang_eagle3_embed")


def _stop(message: str) -> None:
    """Stop the server as SGLang does on a failed warmup: the whole process tree."""
    from sglang.srt.utils import kill_process_tree

    from sglang_eagle3_embed.core.canary.expectations import ENV_MODE

    logger.error("sglang_eagle3_embed: stopping the server (%s=raise): %s", ENV_MODE, message)
    kill_process_tree(os.getpid())


def _mode() -> str:
    from sglang_eagle3_embed.core.canary.expectations import ENV_MODE, MODES
    from sglang_eagle3_embed.core.errors import InputError

    mode = os.environ.get(ENV_MODE, "log")
    if mode not in MODES:
        raise InputError(f"{ENV_MODE}={mode}: use log or raise")
    return mode


def _expectations(disaggregation_mode: str, server_args) -> tuple[Expectations, str]:
    """The expectations the check judges this server by, and a note for its verdict ("" or why the
    draft's config differs from the recorded one). Raises :class:`InputError` when the check cannot
    run: no file, a PD side, other settings, another target, or another draft's weights."""
    from sglang_eagle3_embed.core.canary.expectations import (
        ENV_FILE,
        READ,
        Expectations,
        config_digest,
        settings_differences,
        weights_digest,
    )
    from sglang_eagle3_embed.core.errors import InputError

    path = os.environ.get(ENV_FILE)
    if not path:
        raise InputError(
            f"--warmups {WARMUP} runs the startup canary, but {ENV_FILE} names no expectations file: set "
            f"it to the file sglang-eagle3-embed probe --expectations wrote"
        )
    expectations = Expectations.read(path, ENV_FILE)
    if disaggregation_mode != "null":
        raise InputError(
            f"--disaggregation-mode {disaggregation_mode}: one side of a PD deployment cannot measure its "
            f"accept length (a prefill server makes one token, a decode server warms up on a fake "
            f"prefill); drop --warmups {WARMUP} and run sglang-eagle3-embed canary --url ROUTER --expect "
            f"{path} once both sides serve"
        )
    settings = {name: getattr(server_args, name, None) for name in READ}
    differences = settings_differences(expectations, settings)
    download_dir = getattr(server_args, "download_dir", None)
    target_path = getattr(server_args, "model_path", None)
    target = _served(target_path, getattr(server_args, "revision", None), download_dir)
    if target and _differs(config_digest(target), expectations.target_config_sha256):
        differences.append(
            f"--model-path {target_path}: its config.json is not the one the expectations were recorded on"
        )
    note = ""
    draft_path = getattr(server_args, "speculative_draft_model_path", None)
    draft = _served(draft_path, getattr(server_args, "speculative_draft_model_revision", None), download_dir)
    if draft and _differs(config_digest(draft), expectations.draft_config_sha256):
        if expectations.draft_weights_sha256 and weights_digest(draft) == expectations.draft_weights_sha256:
            # the recorded draft's own tensors under an edited config: the case the check is for
            note = " (the draft's config.json differs from the one recorded; its weights are the recorded draft's)"
        else:
            differences.append(
                f"--speculative-draft-model-path {draft_path}: its config.json is not the one the "
                f"expectations were recorded on, and its weights are not known to be the recorded draft's"
            )
    if differences:
        raise InputError(
            f"{ENV_FILE} {path} was recorded for another deployment: {'; '.join(differences)}; record "
            f"expectations for this one (sglang-eagle3-embed probe --expectations FILE)"
        )
    return expectations, note


def _differs(served: str | None, recorded: str | None) -> bool:
    """Both digests known and unequal (either unknown: not compared, as for files without them)."""
    return bool(served and recorded and served != recorded)


def _served(path: str | None, revision: str | None, download_dir: str | None) -> str | None:
    """The folder the server loaded: a local folder, or a hub id's cached snapshot found as SGLang
    found it (:func:`~sglang_eagle3_embed.core.readers.hub.locate`). None where it cannot be read here: the
    comparison is then skipped, as it is for expectations recorded without digests."""
    from sglang_eagle3_embed.core.readers.hub import HubError, locate

    if not path:
        return None
    try:
        return str(locate(path, revision, download_dir))
    except HubError:
        return None


SIMULATE_ACC_LEN = "SGLANG_SIMULATE_ACC_LEN"
"""SGLang's benchmark knob: above 0, its verify accepts a simulated number of draft tokens
instead of the ones the target agrees with (``srt/speculative/spec_utils.py:276``, ``srt/environ.py:527``).
The server's processes inherit it from the launch's environment, this one included."""


def _simulated_acceptance() -> str | None:
    """The value of :data:`SIMULATE_ACC_LEN` when it switches simulated acceptance on, else None
    (SGLang reads it as a float, off at or below 0)."""
    value = os.environ.get(SIMULATE_ACC_LEN, "").strip()
    try:
        return value if value and float(value) > 0 else None
    except ValueError:
        return value  # SGLang refuses it at startup; not a wiring to judge either


async def run(disaggregation_mode: str, tokenizer_manager) -> bool:
    """The check: True when the server feeds the draft what it was trained on."""
    from sglang.srt.managers.io_struct import GenerateReqInput

    from sglang_eagle3_embed.core.canary.expectations import generate_body, judge, pool
    from sglang_eagle3_embed.core.errors import InputError

    started = time.monotonic()
    simulated = _simulated_acceptance()
    if simulated:
        logger.error(
            "sglang_eagle3_embed startup canary not judged: %s=%s makes SGLang fake its acceptance, "
            "so the served accept length says nothing about the draft's wiring; unset it to check "
            "(the server goes on serving in either mode)",
            SIMULATE_ACC_LEN,
            simulated,
        )
        return False
    try:
        mode = _mode()
        expectations, note = _expectations(disaggregation_mode, tokenizer_manager.server_args)
        request = GenerateReqInput(**generate_body(expectations))
        outputs = await tokenizer_manager.generate_request(request, None).__anext__()
        if isinstance(outputs, dict):
            outputs = [outputs]
        served = pool([o.get("meta_info") or {} for o in outputs])
    except InputError as exc:
        message, ok = f"startup canary not run: {exc}", False
        mode = "raise"  # a self-check asked for and impossible stops the server in either mode
    else:
        verdict = judge(expectations, served)
        message, ok = f"startup canary: {' '.join(verdict.lines)}{note}", verdict.ok
    message = f"{message} ({time.monotonic() - started:.1f} s)"
    if ok:
        logger.info("sglang_eagle3_embed %s", message)
    elif mode == "raise":
        _stop(message)
    else:
        logger.error("sglang_eagle3_embed %s", message)
    return ok
