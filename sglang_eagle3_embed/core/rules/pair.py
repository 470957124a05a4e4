"""The rules of a PD pair: a prefill and a decode command line compared, what ``check ARGS --pd-peer
PEER_ARGS`` reports beside each side's rules. Pure module.

SGLang 0.5.23 compares only page size, KV-cache dtype and layout when the two servers connect
(``srt/disaggregation/common/conn.py:1320-1357``), and the number of metadata buffers, not their
widths (617-636). Everything else that must agree (the models, the plugin, the speculative
settings, the tensors the draft reads) is compared here, each side as SGLang resolved it. The
rules are declared with :func:`~sglang_eagle3_embed.core.rules.registry.rule` at
:attr:`~sglang_eagle3_embed.core.rules.registry.Stage.PAIR` and read a :class:`Pair`; each message
names the flag, what each side has, what SGLang does with it and the side to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core import rule_ids
from sglang_eagle3_embed.core.errors import flag
from sglang_eagle3_embed.core.findings import NotChecked
from sglang_eagle3_embed.core.pd.sides import MODES, PEER, SPEC_TRIPLE, Capture, capture_of, pd_mode
from sglang_eagle3_embed.core.readers.deployment import Deployment
from sglang_eagle3_embed.core.rules.registry import Rule, declared_in, rule

__all__ = ["COMPARED", "PAIR_RULES", "Pair", "Side"]

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
    """``the prefill side`` / ``the decode side`` (set by :meth:`Pair.of`)."""

    @property
    def mode(self) -> str | None:
        return pd_mode(self.deployment)

    def get(self, key: str):
        return self.settings.get(key)


@dataclass(frozen=True)
class Pair:
    """The two sides, named by role (prefill first) when they are one prefill and one decode, else
    by how they were given."""

    a: Side
    b: Side

    @classmethod
    def of(cls, first: Side, peer: Side) -> Pair:
        if {first.mode, peer.mode} == set(MODES):
            first, peer = (first, peer) if first.mode == "prefill" else (peer, first)
            return cls(replace(first, name="the prefill side"), replace(peer, name="the decode side"))
        return cls(replace(first, name=first.given_as), replace(peer, name=peer.given_as))

    @property
    def sides(self) -> tuple[Side, Side]:
        return self.a, self.b


def _differs(name: str, p: Pair, verb: str, consequence: str):
    """Both sides set ``name`` differently: what each has, what SGLang does then, the fix."""
    a, b = p.sides
    if a.get(name) != b.get(name):
        yield (
            f"{flag(name)}: {a.name} {verb} {a.get(name)}, {b.name} {b.get(name)}. {consequence} Fix: "
            f"pass the same {flag(name)} on both sides."
        )


def _not_resolved(p: Pair) -> list[NotChecked]:
    return [
        NotChecked(f"SGLang's resolution did not run on {s.name} (see its errors above)")
        for s in p.sides
        if not s.resolved
    ]


@rule(rule_ids.PD_PAIR_ROLES)
def _roles(p: Pair):
    a, b = p.sides
    if {a.mode, b.mode} == set(MODES):
        return
    for side, other in ((a, b), (b, a)):
        if side.mode is None:
            want = PEER.get(other.mode, "prefill or decode")
            yield (
                f"{side.name} has no --disaggregation-mode (a unified server): a PD pair is one "
                f"--disaggregation-mode prefill and one --disaggregation-mode decode. Fix: pass "
                f"--disaggregation-mode {want} on {side.name}."
            )
    if a.mode is not None and a.mode == b.mode:
        yield (
            f"both command lines pass --disaggregation-mode {a.mode}: a PD pair is one prefill and one "
            f"decode server. Fix: pass --disaggregation-mode {PEER[a.mode]} on {b.name}."
        )


def _differences(x: Mapping | None, y: Mapping | None, limit: int = 5) -> list[str]:
    keys = sorted(k for k in set(x or {}) | set(y or {}) if (x or {}).get(k) != (y or {}).get(k))
    return keys[:limit] + ([f"... ({len(keys)} in all)"] if len(keys) > limit else [])


MODELS = {
    "target": ("model_path", "revision", "--model-path / --revision"),
    "draft": (
        "speculative_draft_model_path",
        "speculative_draft_model_revision",
        "--speculative-draft-model-path / --speculative-draft-model-revision",
    ),
}
"""Per model a pair compares (the :class:`Deployment` field of its config): its path and revision
fields and their flags."""


def _models(p: Pair) -> list[str]:
    """The models both sides load: the target, and the draft when both run EAGLE-3."""
    return ["target", "draft"] if p.a.deployment.eagle3 and p.b.deployment.eagle3 else ["target"]


def _keys(p: Pair, model: str):
    path, revision, flags = MODELS[model]
    a, b = p.sides
    key_a, key_b = (a.get(path), a.get(revision)), (b.get(path), b.get(revision))
    named = f"{a.name} loads {_shown(*key_a)}, {b.name} {_shown(*key_b)}"
    return key_a, key_b, named, flags


def _configs_differ(p: Pair, model: str):
    if model not in _models(p):
        return
    key_a, key_b, named, flags = _keys(p, model)
    da, db = getattr(p.a.deployment, model), getattr(p.b.deployment, model)
    if (key_a[0] is not None or key_b[0] is not None) and da is not None and db is not None and da != db:
        yield (
            f"{flags}: {named}, and their configs as SGLang builds them differ "
            f"({', '.join(_differences(da, db))}). SGLang compares neither, and the decode side "
            f"would continue from the prefill's KV cache of another model. Fix: pass the same "
            f"{flags} on both sides."
        )


@rule(rule_ids.PD_PAIR_TARGET)
def _target(p: Pair):
    yield from _configs_differ(p, "target")


@rule(rule_ids.PD_PAIR_DRAFT)
def _draft(p: Pair):
    yield from _configs_differ(p, "draft")


@rule(rule_ids.PD_PAIR_MODEL_NAMES)
def _model_names(p: Pair):
    for model in _models(p):
        key_a, key_b, named, flags = _keys(p, model)
        da, db = getattr(p.a.deployment, model), getattr(p.b.deployment, model)
        if key_a != key_b and not (da is not None and db is not None and da != db):
            yield (
                f"{flags}: {named}; their configs are the same, but check cannot tell whether their "
                f"weights are. Fix: pass the same path and revision on both sides, or make sure both "
                f"hold the same files."
            )


def _shown(path, revision) -> str:
    if path is None:
        return "none"
    return f"{path} at revision {revision}" if revision else str(path)


@rule(rule_ids.PD_PAIR_PLUGIN)
def _plugin(p: Pair):
    a, b = p.sides
    with_, without = (a, b) if a.deployment.plugin_requested else (b, a)
    if not with_.deployment.plugin_requested or without.deployment.plugin_requested:
        return
    impl = without.deployment.raw.get("model_impl")
    yield (
        f"--model-impl: {with_.name} passes {MODEL_IMPL}, {without.name} passes {impl}: the plugin "
        f"serves one side only, and SGLang's handshake cannot tell (the capture rule says what each "
        f"side feeds the draft). Fix: pass --model-impl {MODEL_IMPL} on {without.name} too."
    )


def _algorithm(side: Side) -> str:
    return "" if side.deployment.capture_only else str(side.get("speculative_algorithm") or "").upper()


@rule(rule_ids.PD_PAIR_SPECULATIVE)
def _speculative(p: Pair):
    a, b = p.sides
    alg_a, alg_b = _algorithm(a), _algorithm(b)
    if alg_a == alg_b:
        return
    if alg_a and alg_b:
        yield (
            f"--speculative-algorithm: {a.name} runs {alg_a}, {b.name} {alg_b}. The decode side would "
            f"continue from a draft state another algorithm made. Fix: pass the same "
            f"--speculative-algorithm on both sides."
        )
        return
    spec, none = (a, b) if alg_a else (b, a)
    yield (
        f"--speculative-algorithm: {spec.name} runs {_algorithm(spec)}, {none.name} no speculative "
        f"decoding. SGLang compares no speculative setting between the two: a prefill without a draft "
        f"sends the decode side no draft KV cache and no first proposal, and a decode without one "
        f"drops what the prefill's draft computed. Fix: pass the same speculative flags on "
        f"{none.name} (--speculative-algorithm {_algorithm(spec)} and the draft)."
    )


@rule(rule_ids.PD_PAIR_SPECULATIVE_SETTINGS)
def _settings(p: Pair):
    if not (_algorithm(p.a) and _algorithm(p.b)):
        return
    unresolved = _not_resolved(p)
    if unresolved:
        yield from unresolved
        return
    for name in SPEC_TRIPLE:
        yield from _differs(
            name, p, "resolves",
            "SGLang does not compare them: the decode side cuts the prefill's first proposal to its "
            "own top-k (srt/speculative/eagle_disaggregation.py:58-72) and drafts with its own "
            "settings after.",
        )  # fmt: skip


@rule(rule_ids.PD_PAIR_CAPTURE)
def _capture(p: Pair):
    a, b = p.sides
    ca, cb = capture_of(a.deployment), capture_of(b.deployment)
    if ca is None or cb is None:
        return
    for c in (ca, cb):
        if isinstance(c, NotChecked):
            yield c
    if isinstance(ca, NotChecked) or isinstance(cb, NotChecked):
        return
    if ca.indices is not None and ca.indices == cb.indices:
        return
    yield _capture_message(a, ca, b, cb)


def _capture_message(a: Side, ca: Capture, b: Side, cb: Capture) -> str:
    said = f"{a.name} ({ca.reader}) {ca.outcome}; {b.name} ({cb.reader}) {cb.outcome}"
    stock = [s for s, c in ((a, ca), (b, cb)) if c.reader == "stock SGLang"]
    if len(stock) != 1:
        return (
            f"the draft reads other tensors on each side: {said}. Fix: serve the same draft and "
            f"target with the same --model-impl on both sides."
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
    return f"{said}{effect}. Fix: pass --model-impl {MODEL_IMPL} on {wrong.name}."


HANDSHAKE = {
    rule_ids.PD_PAIR_PAGE_SIZE: ("page_size", "Page size mismatch", "1320-1325"),
    rule_ids.PD_PAIR_KV_CACHE_DTYPE: ("kv_cache_dtype", "KV cache dtype mismatch", "1327-1335"),
}
"""What SGLang compares itself when the decode server first contacts the prefill: the setting, the
error that stops the decode server's scheduler, and its lines in srt/disaggregation/common/conn.py."""


@rule(rule_ids.PD_PAIR_PAGE_SIZE)
@rule(rule_ids.PD_PAIR_KV_CACHE_DTYPE)
def _handshake(p: Pair, rule_id: str):
    unresolved = _not_resolved(p)
    if unresolved:
        yield from unresolved
        return
    name, error, lines = HANDSHAKE[rule_id]
    yield from _differs(
        name, p, "resolves",
        f"SGLang's decode server stops at its first contact with the prefill: RuntimeError: "
        f"{error} (srt/disaggregation/common/conn.py:{lines}).",
    )  # fmt: skip


@rule(rule_ids.PD_PAIR_TRANSFER_BACKEND)
def _backend(p: Pair):
    yield from _differs(
        "disaggregation_transfer_backend", p, "passes",
        "SGLang's handshake does not name the backend (srt/disaggregation/common/conn.py:1584-1611): "
        "the two sides cannot exchange the KV cache.",
    )  # fmt: skip


PAIR_RULES: dict[str, Rule] = declared_in(__name__)
"""Every rule of a PD pair by id, in the order of :mod:`~sglang_eagle3_embed.core.rule_ids`, of the
report and of ``docs/validation.md``."""
