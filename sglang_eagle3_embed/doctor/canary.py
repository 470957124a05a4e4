"""The canary's two ends outside a server: the expectations a probe report records, and a running
server (or a PD router) asked over HTTP. The format, pooling and verdict are
:mod:`sglang_eagle3_embed.core.canary.expectations`; the server's own startup self-check is
:mod:`sglang_eagle3_embed.patch.canary_warmup`."""

from __future__ import annotations

import http.client
import json
import random
import re
import urllib.error
import urllib.request
from dataclasses import dataclass

from sglang_eagle3_embed.core.canary.expectations import (
    READ,
    Expectations,
    Served,
    Verdict,
    WiringExpectation,
    config_digest,
    generate_body,
    judge,
    pool,
    settings_differences,
    weights_digest,
)
from sglang_eagle3_embed.core.errors import InputError
from sglang_eagle3_embed.doctor.report import ProbeReport
from sglang_eagle3_embed.doctor.request import ProbeRequest
from sglang_eagle3_embed.doctor.wirings import PLUGIN

__all__ = ["CanaryResult", "expectations_of", "run_canary", "settings_of", "undetermined"]

SHOWN = (
    *READ,
    "model_impl",
    "speculative_draft_model_path",
    "disaggregation_mode",
)
"""The server settings a canary report shows."""


def _trained(report: ProbeReport):
    """The wiring a correct server feeds the draft: the plugin's reading where it scores among the
    best with draft tokens accepted (neighbouring layers often tie with it), else the best where
    the probe determined it; None where neither holds."""
    plugin = report.result(PLUGIN)
    if plugin is not None and report.is_named(plugin) and report.drafts(plugin):
        return plugin
    return report.best if report.determined else None


def undetermined(report: ProbeReport) -> str | None:
    """Why ``report`` cannot give a canary its expectations, or None when it can."""
    if _trained(report) is None:
        return (
            f"the probe did not determine the wiring the draft was trained for, and the plugin's reading "
            f"is not among the best ({report.undetermined_because or 'it scores below the best'})"
        )
    return None


def expectations_of(report: ProbeReport, request: ProbeRequest) -> Expectations:
    """What a server serving this pair correctly must show, from ``report`` (:func:`undetermined`
    says when it cannot): its prompts, settings and every scored wiring's predicted accept length
    (standard error over the prompts), the trained one named."""

    def wiring(result) -> WiringExpectation:
        return WiringExpectation(
            result.wiring.names,
            tuple(result.wiring.indices),
            result.score.accept_length,
            result.gain_se,
            result.wiring.kinds,
        )

    scored = {id(r): wiring(r) for r in report.scored}
    return Expectations(
        prompts=report.prompt_ids,
        max_new_tokens=report.new_tokens,
        num_steps=report.steps,
        trained=scored[id(_trained(report))],
        wirings=tuple(scored.values()),
        backend=report.backend,
        dtype=report.dtype,
        target_config_sha256=config_digest(request.target),
        draft_config_sha256=config_digest(request.draft),
        draft_weights_sha256=weights_digest(request.draft),
    )


@dataclass(frozen=True)
class CanaryResult:
    url: str
    server: dict
    """The server's settings from ``/server_info`` (empty where it does not answer it: a router)."""
    served: Served
    verdict: Verdict | None
    refused: tuple[str, ...] = ()
    """Settings that differ from the recorded ones: no comparison made."""

    @property
    def exit_code(self) -> int:
        if self.refused:
            return 2
        return 0 if self.verdict is None or self.verdict.ok else 1

    def as_dict(self, expectations: Expectations | None) -> dict:
        out = {
            "ok": self.exit_code == 0,
            "url": self.url,
            "server": self.server,
            "served_accept_length": self.served.accept_length,
            "served_se": self.served.se,
            "requests": self.served.requests,
        }
        if self.refused:
            out["refused"] = list(self.refused)
        elif self.verdict is not None and expectations is not None:
            out.update(self.verdict.as_dict(self.served, expectations))
        return out

    def text(self) -> str:
        shown = ", ".join(f"{k}={self.server[k]}" for k in SHOWN if k in self.server) or "not reported"
        lines = [f"server    : {self.url}", f"settings  : {shown}"]
        lines.append(
            f"served    : accept length {self.served.accept_length:.2f} (± {self.served.se:.2f}) over "
            f"{self.served.requests} requests, {self.served.tokens} tokens"
        )
        if self.refused:
            lines += [f"not compared: {r}" for r in self.refused]
            lines.append(
                "The expectations hold for other settings: serve with the recorded ones, or record new "
                "expectations with sglang-eagle3-embed probe --num-steps N --expectations FILE."
            )
        elif self.verdict is not None:
            lines += ["", *self.verdict.lines]
        return "\n".join(lines)


def settings_of(info: dict) -> dict:
    """The :data:`SHOWN` settings of a ``/server_info`` answer; of a PD router's answer (each side's,
    ``{"prefill": [...], "decode": [...]}``, as ``sglang_router``'s mini load balancer gives), the
    first decode server's: its speculative settings decide the accept length."""
    decode = info.get("decode")
    if isinstance(decode, list) and decode and isinstance(decode[0], dict):
        info = decode[0]
    return {k: info[k] for k in SHOWN if k in info}


class _Client:
    def __init__(self, url: str, api_key: str | None, timeout: float):
        self.url, self.timeout, self.api_key = url.rstrip("/"), timeout, api_key
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.answered: str | None = None
        """The last path the server answered (a failure after an answer is not "no server")."""

    def call(self, path: str, body: dict | None = None):
        where = f"--url {self.url}{path}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:300]
            if exc.code in (401, 403):
                raise InputError(
                    f"{where}: HTTP {exc.code}, the server refused the API key given (--api-key or "
                    f"$SGLANG_API_KEY): give the key its --api-key was started with"
                    if self.api_key
                    else f"{where}: HTTP {exc.code}, the server wants --api-key"
                ) from None
            raise InputError(f"{where}: HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise InputError(self._failure(where, getattr(exc, "reason", exc))) from None
        try:
            answer = json.loads(text)
        except (ValueError, RecursionError):
            raise InputError(f"{where}: the answer is not JSON: not an SGLang server") from None
        self.answered = path
        return answer

    def _failure(self, where: str, reason) -> str:
        """What failed, worded for it: no answer in time, the connection cut, no server at all."""
        after = f" (it answered {self.answered})" if self.answered else ""
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            return (
                f"{where}: no answer within --timeout {self.timeout:g} s{after}; the server is busy "
                f"or stuck: raise --timeout, or look at its log"
            )
        if isinstance(reason, http.client.HTTPException):
            return f"{where}: the answer is not HTTP ({type(reason).__name__}): not an SGLang server"
        if self.answered or isinstance(reason, (ConnectionResetError, ConnectionAbortedError)):
            return f"{where}: the connection failed ({reason}){after}; look at the server's log"
        return (
            f"--url {self.url}: no server answers ({reason}); start it, or give the address it "
            f"listens on (http://HOST:PORT)"
        )

    def server_info(self) -> dict:
        """:func:`settings_of` ``/server_info``, or of the deprecated ``/get_server_info``; {} where
        neither answers."""
        for path in ("/server_info", "/get_server_info"):
            try:
                info = self.call(path)
            except InputError as exc:
                if not re.search(r": HTTP (404|405)\b", str(exc)):  # only a missing route is tried again
                    raise
                continue
            if isinstance(info, dict):
                return settings_of(info)
        return {}


def run_canary(
    url: str,
    expectations: Expectations | None,
    *,
    api_key: str | None = None,
    timeout: float = 300.0,
    tolerance: float | None = None,
    num_prompts: int = 8,
) -> CanaryResult:
    """Ask the server at ``url`` the canary's prompts and judge its accept length against
    ``expectations``; without expectations, ``num_prompts`` random prompts (token ids below 100, any
    vocabulary has them) only measure it. Settings that change the accept length and differ from
    the recorded ones stop the comparison (``refused``)."""
    client = _Client(url, api_key, timeout)
    server = client.server_info()
    if expectations is not None:
        refused = tuple(settings_differences(expectations, server))
        body = generate_body(expectations)
    else:
        refused = ()
        rng = random.Random(0)
        prompts = [[rng.randrange(1, 100) for _ in range(16)] for _ in range(num_prompts)]
        body = {
            "input_ids": prompts,
            "sampling_params": {"temperature": 0.0, "max_new_tokens": 64, "ignore_eos": True},
        }
    answers = client.call("/generate", body)
    if isinstance(answers, dict):
        answers = [answers]
    if not isinstance(answers, list) or not all(isinstance(a, dict) for a in answers):
        raise InputError(
            f"--url {url}/generate: the answer is not a list of generations: not an SGLang server"
        )
    sent = len(body["input_ids"])
    metas = [a.get("meta_info") if isinstance(a.get("meta_info"), dict) else {} for a in answers]
    bare = sum(1 for m in metas if not (m.get("spec_accept_length") and m.get("completion_tokens")))
    if len(answers) != sent or bare:
        got = f"{len(answers)} answers to {sent} prompts" if len(answers) != sent else f"{sent} answers"
        lacking = f", {bare} without spec_accept_length and completion_tokens" if bare else ""
        raise InputError(
            f"--url {url}/generate: {got}{lacking}; every prompt's statistics are needed, so nothing "
            f"is judged (a proxy that merges or drops answers, or a server without speculative decoding)"
        )
    served = pool(metas)
    if expectations is None or refused:
        return CanaryResult(url, server, served, None, refused)
    kwargs = {} if tolerance is None else {"relative": tolerance}
    return CanaryResult(url, server, served, judge(expectations, served, **kwargs))
