"""A prefill and a decode command line compared: what ``check ARGS --pd-peer PEER_ARGS`` reports
beside each side's rules. Pure module.

SGLang 0.5.23 compares only page size, KV-cache dtype and layout when the two servers connect
(``srt/disaggregation/common/conn.py:1320-1357``), and the number of metadata buffers, not their
widths (617-636). Everything else that must agree (the models, the plugin, the speculative
settings, the tensors the draft reads) is compared here, each side as SGLang resolved it. Each
mismatch is an error naming the side and the flag; ``docs/pd.md`` says what SGLang does with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.deployment import Deployment
from sglang_eagle3_embed.core.errors import flag
from sglang_eagle3_embed.core.findings import NotChecked, Severity
from sglang_eagle3_embed.core.pd import MODES, PEER, SPEC_TRIPLE, Capture, capture_of, pd_mode

__all__ = ["CHECKS", "COMPARED", "PairFinding", "Side", "compare", "pair_verdicts"]

COMPARED = (
    "model_path",
    "revision",
    "speculative_draft_model_path",
    "speculative_draft_model_revision",
    "speculative_algorithm",
    *SPEC_TRIPLE,
    "page_size",
    "kv_cache_dtype",
    "disaggregation_transfer_backend",
)
"""The launch fields a side carries for the comparison (as SGLang resolved them; the transfer
backend as passed, since SGLang rewrites ``mooncake_tcp`` to ``mooncake`` plus an environment
variable, ``srt/arg_groups/pd_disaggregation_hook.py:27-45``)."""

CHECKS = (
    "roles",
    "target",
    "draft",
    "plugin",
    "speculative",
    "speculative-settings",
    "capture",
    "page-size",
    "kv-cache-dtype",
    "transfer-backend",
)
"""What the pair compares, in the order of the report."""


@dataclass(frozen=True)
class Side:
    """One command line of the pair."""

    given_as: str
    """How the user gave it: ``the command line`` or ``the --pd-peer command line``."""
    deployment: Deployment
    """What the rules read (after SGLang's resolution when it ran)."""
    settings: Mapping[str, object] = field(default_factory=dict)
    """The :data:`COMPARED` fields."""
    resolved: bool = True
    """SGLang's resolution ran on this side (its settings are what the server would use)."""
    name: str = ""
    """``the prefill side`` / ``the decode side`` (set by :func:`compare`)."""

    @property
    def mode(self) -> str | None:
        return pd_mode(self.deployment)

    def get(self, key: str):
        return self.settings.get(key)


@dataclass(frozen=True)
class PairFinding:
    check: str
    severity: Severity
    side: str
    """The side to change (``the prefill side``, ``the decode side``), or ``both``."""
    flag: str
    message: str


def _named(a: Side, b: Side) -> tuple[Side, Side]:
    """The two sides, named by role (prefill first) when they are one prefill and one decode."""
    from dataclasses import replace

    if {a.mode, b.mode} == set(MODES):
        a, b = (a, b) if a.mode == "prefill" else (b, a)
        return replace(a, name="the prefill side"), replace(b, name="the decode side")
    return replace(a, name=a.given_as), replace(b, name=b.given_as)


def compare(first: Side, peer: Side) -> list[PairFinding]:
    """Every mismatch between the two sides, as :class:`PairFinding`; :data:`CHECKS` that find
    none are ok (:func:`pair_verdicts`)."""
    a, b = _named(first, peer)
    found: list[PairFinding] = []
    for check in (_roles, _models, _plugin, _speculative, _settings, _capture, _handshake, _backend):
        found += check(a, b)
    return found


def pair_verdicts(findings: list[PairFinding]) -> dict[str, str]:
    rank = {"ok": 0, Severity.NOT_CHECKED.value: 1, Severity.WARNING.value: 2, Severity.ERROR.value: 3}
    result = dict.fromkeys(CHECKS, "ok")
    for f in findings:
        if rank[f.severity.value] > rank[result[f.check]]:
            result[f.check] = f.severity.value
    return result


def _error(check: str, side: str, flag_: str, message: str) -> PairFinding:
    return PairFinding(check, Severity.ERROR, side, flag_, message)


def _differs(check: str, name: str, a: Side, b: Side, verb: str, consequence: str) -> PairFinding:
    """Both sides set ``name`` differently: what each has, what SGLang does then, the fix."""
    return _error(
        check,
        "both",
        flag(name),
        f"{flag(name)}: {a.name} {verb} {a.get(name)}, {b.name} {b.get(name)}. {consequence} Fix: pass the "
        f"same {flag(name)} on both sides.",
    )


def _roles(a: Side, b: Side):
    if {a.mode, b.mode} == set(MODES):
        return
    for side, other in ((a, b), (b, a)):
        if side.mode is None:
            want = PEER.get(other.mode, "prefill or decode")
            yield _error(
                "roles",
                side.name,
                "--disaggregation-mode",
                f"{side.name} has no --disaggregation-mode (a unified server): a PD pair is one "
                f"--disaggregation-mode prefill and one --disaggregation-mode decode. Fix: pass "
                f"--disaggregation-mode {want} on {side.name}.",
            )
    if a.mode is not None and a.mode == b.mode:
        yield _error(
            "roles",
            b.name,
            "--disaggregation-mode",
            f"both command lines pass --disaggregation-mode {a.mode}: a PD pair is one prefill and one "
            f"decode server. Fix: pass --disaggregation-mode {PEER[a.mode]} on {b.name}.",
        )


def _differences(x: Mapping | None, y: Mapping | None, limit: int = 5) -> list[str]:
    keys = sorted(k for k in set(x or {}) | set(y or {}) if (x or {}).get(k) != (y or {}).get(k))
    return keys[:limit] + ([f"... ({len(keys)} in all)"] if len(keys) > limit else [])


def _model(check: str, a: Side, b: Side, path: str, revision: str, config: str, flags: str):
    """The same model on both sides: an error when the configs (as SGLang builds them) differ, a
    warning when the two name it differently and the configs cannot tell the weights apart."""
    da, db = getattr(a.deployment, config), getattr(b.deployment, config)
    key_a, key_b = (a.get(path), a.get(revision)), (b.get(path), b.get(revision))
    if key_a[0] is None and key_b[0] is None:
        return
    named = f"{a.name} loads {_shown(*key_a)}, {b.name} {_shown(*key_b)}"
    if da is not None and db is not None and da != db:
        fields = ", ".join(_differences(da, db))
        yield _error(
            check,
            "both",
            flags,
            f"{flags}: {named}, and their configs as SGLang builds them differ ({fields}). SGLang "
            f"compares neither, and the decode side would continue from the prefill's KV cache of "
            f"another model. Fix: pass the same {flags} on both sides.",
        )
    elif key_a != key_b:
        yield PairFinding(
            check,
            Severity.WARNING,
            "both",
            flags,
            f"{flags}: {named}; their configs are the same, but check cannot tell whether their weights "
            f"are. Fix: pass the same path and revision on both sides, or make sure both hold the same files.",
        )


def _shown(path, revision) -> str:
    if path is None:
        return "none"
    return f"{path} at revision {revision}" if revision else str(path)


def _models(a: Side, b: Side):
    yield from _model("target", a, b, "model_path", "revision", "target", "--model-path / --revision")
    if a.deployment.eagle3 and b.deployment.eagle3:
        yield from _model(
            "draft",
            a,
            b,
            "speculative_draft_model_path",
            "speculative_draft_model_revision",
            "draft",
            "--speculative-draft-model-path / --speculative-draft-model-revision",
        )


def _plugin(a: Side, b: Side):
    with_, without = (a, b) if a.deployment.plugin_requested else (b, a)
    if not with_.deployment.plugin_requested or without.deployment.plugin_requested:
        return
    impl = without.deployment.raw.get("model_impl")
    yield _error(
        "plugin",
        without.name,
        "--model-impl",
        f"--model-impl: {with_.name} passes {MODEL_IMPL}, {without.name} passes {impl}: the plugin "
        f"serves one side only, and SGLang's handshake cannot tell (the capture row says what each "
        f"side feeds the draft). Fix: pass --model-impl {MODEL_IMPL} on {without.name} too.",
    )


def _algorithm(side: Side) -> str:
    return "" if side.deployment.capture_only else str(side.get("speculative_algorithm") or "").upper()


def _speculative(a: Side, b: Side):
    alg_a, alg_b = _algorithm(a), _algorithm(b)
    if alg_a == alg_b:
        return
    if alg_a and alg_b:
        yield _error(
            "speculative",
            "both",
            "--speculative-algorithm",
            f"--speculative-algorithm: {a.name} runs {alg_a}, {b.name} {alg_b}. The decode side would "
            f"continue from a draft state another algorithm made. Fix: pass the same "
            f"--speculative-algorithm on both sides.",
        )
        return
    spec, none = (a, b) if alg_a else (b, a)
    yield _error(
        "speculative",
        none.name,
        "--speculative-algorithm",
        f"--speculative-algorithm: {spec.name} runs {_algorithm(spec)}, {none.name} no speculative "
        f"decoding. SGLang compares no speculative setting between the two: a prefill without a draft "
        f"sends the decode side no draft KV cache and no first proposal, and a decode without one "
        f"drops what the prefill's draft computed. Fix: pass the same speculative flags on "
        f"{none.name} (--speculative-algorithm {_algorithm(spec)} and the draft).",
    )


def _not_resolved(check: str, a: Side, b: Side):
    for side in (a, b):
        if not side.resolved:
            yield PairFinding(
                check,
                Severity.NOT_CHECKED,
                side.name,
                "",
                f"not checked: SGLang's resolution did not run on {side.name} (see its errors above)",
            )


def _settings(a: Side, b: Side):
    if not (_algorithm(a) and _algorithm(b)):
        return
    unresolved = list(_not_resolved("speculative-settings", a, b))
    if unresolved:
        yield from unresolved
        return
    for name in SPEC_TRIPLE:
        if a.get(name) != b.get(name):
            yield _differs(
                "speculative-settings", name, a, b, "resolves",
                "SGLang does not compare them: the decode side cuts the prefill's first proposal to its "
                "own top-k (srt/speculative/eagle_disaggregation.py:58-72) and drafts with its own "
                "settings after.",
            )  # fmt: skip


def _capture(a: Side, b: Side):
    ca, cb = capture_of(a.deployment), capture_of(b.deployment)
    if ca is None or cb is None:
        return
    for side, c in ((a, ca), (b, cb)):
        if isinstance(c, NotChecked):
            yield PairFinding("capture", Severity.NOT_CHECKED, side.name, "", f"not checked: {c.why}")
    if isinstance(ca, NotChecked) or isinstance(cb, NotChecked):
        return
    if ca.indices is not None and ca.indices == cb.indices:
        return
    yield _capture_error(a, ca, b, cb)


def _capture_error(a: Side, ca: Capture, b: Side, cb: Capture) -> PairFinding:
    said = f"{a.name} ({ca.reader}) {ca.outcome}; {b.name} ({cb.reader}) {cb.outcome}"
    stock = [s for s, c in ((a, ca), (b, cb)) if c.reader == "stock SGLang"]
    if len(stock) != 1:
        return _error(
            "capture",
            "both",
            "--speculative-draft-model-path",
            f"the draft reads other tensors on each side: {said}. Fix: serve the same draft and "
            f"target with the same --model-impl on both sides.",
        )
    wrong = stock[0]
    if (ca if wrong is a else cb).indices is None:
        effect = ""  # the outcome says how it fails
    elif wrong.mode == "decode":
        effect = ": the decode side silently feeds the draft the wrong tensors for every generated token"
    elif wrong.mode == "prefill":
        effect = (
            ": the prefill side silently builds the draft's prompt KV cache and first proposal from the "
            "wrong tensors"
        )
    else:
        effect = f": {wrong.name} silently feeds the draft the wrong tensors"
    return _error(
        "capture",
        wrong.name,
        "--model-impl",
        f"{said}{effect}. Fix: pass --model-impl {MODEL_IMPL} on {wrong.name}.",
    )


HANDSHAKE = {
    "page-size": ("page_size", "Page size mismatch", "1320-1325"),
    "kv-cache-dtype": ("kv_cache_dtype", "KV cache dtype mismatch", "1327-1335"),
}


def _handshake(a: Side, b: Side):
    """Page size and KV-cache dtype: SGLang compares them itself, when the decode server first
    contacts the prefill, and stops the decode server's scheduler."""
    for check, (name, error, lines) in HANDSHAKE.items():
        unresolved = list(_not_resolved(check, a, b))
        if unresolved:
            yield from unresolved
            continue
        if a.get(name) != b.get(name):
            yield _differs(
                check, name, a, b, "resolves",
                f"SGLang's decode server stops at its first contact with the prefill: RuntimeError: "
                f"{error} (srt/disaggregation/common/conn.py:{lines}).",
            )  # fmt: skip


def _backend(a: Side, b: Side):
    name = "disaggregation_transfer_backend"
    if a.get(name) != b.get(name):
        yield _differs(
            "transfer-backend", name, a, b, "passes",
            "SGLang's handshake does not name the backend (srt/disaggregation/common/conn.py:1584-1611): "
            "the two sides cannot exchange the KV cache.",
        )  # fmt: skip
