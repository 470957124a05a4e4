"""The probe's report: each wiring's scores, what they allow to conclude, and how it renders (a
table with the verdict, or JSON)."""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import NormalDist

from sglang_eagle3_embed.doctor.chain import ChainScore
from sglang_eagle3_embed.doctor.wirings import LITERAL, PLUGIN, STOCK, Wiring

__all__ = ["CONFIG_READINGS", "ProbeReport", "WiringResult"]


@dataclass(frozen=True)
class WiringResult:
    wiring: Wiring
    score: ChainScore | None
    deficit: float = 0.0
    """Accept length below the best wiring's, per prompt, averaged (paired over the same prompts)."""
    deficit_se: float = 0.0
    gain: float = 0.0
    """Draft tokens accepted per verify step (accept length - 1), per prompt, averaged."""
    gain_se: float = 0.0

    def as_dict(self) -> dict:
        out = {"names": list(self.wiring.names), "capture_indices": self.wiring.indices}
        out["tensors"] = self.wiring.describe()
        if self.score is None:
            out["fails"] = self.wiring.failure
        else:
            out.update(self.score.as_dict(), deficit=self.deficit, deficit_se=self.deficit_se)
            out.update(gain=self.gain, gain_se=self.gain_se)
        return out


CONFIG_READINGS = (PLUGIN, *LITERAL)
"""The names of the wirings the config itself describes (the plugin's reading, the literal ids),
unless the reading takes no ids from it (:attr:`Wiring.reads_defaults_only`)."""

Z_GAIN = NormalDist().inv_cdf(0.95)
"""Standard errors by which a wiring's accepted draft tokens must exceed zero to count as
evidence that the draft works with it (one-sided, 5%)."""


@dataclass
class ProbeReport:
    """The scored wirings and what they allow to conclude.

    The report names the wiring the draft was trained for only when it is ``determined``: at least
    two wirings were scored over two prompts or more, the best gets draft tokens accepted beyond
    the noise, one of them is a reading of the ids the config names, and the best is clear of
    every other by more than ``z`` standard errors of their paired difference, where ``z`` bounds
    the chance of any false separation among the comparisons made to 5% (Bonferroni: about 2.8 for
    10 other wirings). Otherwise the verdict is "undetermined", with the reason.

    The best is the wiring with the highest pooled accept length (what a server reports); the
    others are compared with it per prompt, and one that scores above it per prompt counts as tied."""

    results: list[WiringResult]
    steps: int
    prompts: int
    new_tokens: int
    backend: str
    prompt_ids: tuple[tuple[int, ...], ...] = field(default=(), repr=False)
    """The prompts scored, as token ids (what a canary replays)."""
    dtype: str = ""
    """The dtype the target ran in."""
    best: WiringResult | None = field(init=False)
    ties: list[WiringResult] = field(init=False)

    def __post_init__(self):
        scored = [r for r in self.results if r.score is not None]
        self.best = max(scored, key=lambda r: r.score.accept_length) if scored else None
        z = self.z
        self.ties = [r for r in scored if r is not self.best and r.deficit < z * max(r.deficit_se, 1e-9)]

    @property
    def z(self) -> float:
        """Standard errors within which a wiring ties with the best (5% family-wise, two-sided)."""
        comparisons = max(1, sum(r.score is not None for r in self.results) - 1)
        return NormalDist().inv_cdf(1 - 0.05 / (2 * comparisons))

    @property
    def scored(self) -> list[WiringResult]:
        return [r for r in self.results if r.score is not None]

    def result(self, name: str) -> WiringResult | None:
        """The scored or failed wiring that ``name`` names; None when it was dropped (its reading
        does not fit the draft's fc)."""
        return next((r for r in self.results if name in r.wiring.names), None)

    def is_named(self, result: WiringResult) -> bool:
        """The best wiring or one indistinguishable from it."""
        return result.score is not None and (result is self.best or result in self.ties)

    @staticmethod
    def drafts(result: WiringResult) -> bool:
        """Draft tokens are accepted under this wiring beyond the noise of the prompts probed."""
        return result.score is not None and result.gain > Z_GAIN * max(result.gain_se, 1e-9)

    def _describes_config(self, result: WiringResult) -> bool:
        return bool(set(result.wiring.names) & set(CONFIG_READINGS)) and not result.wiring.reads_defaults_only

    @property
    def undetermined_because(self) -> str | None:
        """Why the report cannot name the trained wiring, or None when it can."""
        if len(self.scored) < 2:
            return (
                f"only one wiring could be scored ({self.best.wiring.name})"
                if self.best
                else "no wiring could be scored"
            )
        if self.prompts < 2:
            return "one prompt gives no spread to compare wirings by; probe more prompts (--num-prompts)"
        if not self.drafts(self.best):
            return (
                f"no wiring gets draft tokens accepted beyond the noise (at best accept length "
                f"{self.best.score.accept_length:.2f} over {self.prompts} prompts): the draft was trained "
                "on none of the wirings tried, or for another target; with a weak draft, probe more "
                "prompts (--num-prompts)"
            )
        plugin = self.result(PLUGIN)
        if plugin is not None and plugin.wiring.reads_defaults_only:
            return (
                "the draft config names no aux layer ids, so it does not say what the draft was "
                "trained on: SGLang's default layers and their neighbours are scored, and the wiring "
                "it was trained on may be none of them"
            )
        if not any(self._describes_config(r) for r in self.scored):
            return "the config's own reading could not be scored (see the plugin's line below)"
        if self.ties:
            names = "; ".join(r.wiring.name for r in [self.best, *self.ties])
            return (
                f"{names} score alike (within {self.z:.1f} standard errors of their paired difference "
                f"over {self.prompts} prompts); probe more prompts (--num-prompts) to separate them"
            )
        return None

    @property
    def determined(self) -> bool:
        return self.undetermined_because is None

    @property
    def comparable(self) -> bool:
        """Whether the scores can be compared at all: two wirings or more, over two prompts or more."""
        return len(self.scored) >= 2 and self.prompts >= 2

    def found_nothing_wrong(self, result: WiringResult | None) -> bool:
        """This reading of the config was scored against other wirings, is the best, alone or tied,
        gets draft tokens accepted beyond the noise, and takes its ids from the config. Scored
        alone, over one prompt, with nothing accepted, or with SGLang's default layers for want of
        ids, it is not evidence of anything."""
        return (
            result is not None
            and self.comparable
            and self.is_named(result)
            and self.drafts(result)
            and not result.wiring.reads_defaults_only
        )

    @property
    def plugin_ok(self) -> bool:
        """Nothing found wrong with the plugin's reading (:meth:`found_nothing_wrong`)."""
        return self.found_nothing_wrong(self.result(PLUGIN))

    def verdict(self) -> list[str]:
        best = self.best
        if self.determined:
            lines = [
                f"The draft was trained for: {best.wiring.describe()} (capture indices "
                f"{list(best.wiring.indices)}; predicted accept length {best.score.accept_length:.2f})."
            ]
        else:
            lines = [f"Undetermined which wiring the draft was trained for: {self.undetermined_because}."]
            if best is not None and not self.ties:
                lines.append(
                    f"Best scored: {best.wiring.describe()} (predicted accept length "
                    f"{best.score.accept_length:.2f}); not evidence that the draft was trained on it."
                )
        for name, who in ((PLUGIN, "--model-impl sglang_eagle3_embed"), (STOCK, "stock SGLang")):
            r = self.result(name)
            if r is None:  # dropped: its wiring reads another number of tensors than the fc
                lines.append(f"{who}: not scored (its reading does not fit the draft's fc)")
            elif r.score is None:
                lines.append(f"{who}: {r.wiring.failure}")
            elif not self.comparable:
                lines.append(
                    f"{who} reads the config as [{r.wiring.describe()}] (predicted accept length "
                    f"{r.score.accept_length:.2f}): nothing to compare it with, so no verdict."
                )
            elif r.wiring.reads_defaults_only:
                lines.append(
                    f"{who} takes no ids from the config and captures SGLang's default layers "
                    f"[{r.wiring.describe()}] (predicted accept length {r.score.accept_length:.2f}, "
                    f"{self._standing(r)}): nothing shows the draft was trained on them; write the ids "
                    "it was trained on into the draft config (eagle_config.eagle_aux_hidden_state_layer_ids)."
                )
            elif self.is_named(r) and not self.drafts(r):
                lines.append(
                    f"{who} reads the config as [{r.wiring.describe()}]: no draft tokens accepted "
                    f"beyond the noise with it (predicted accept length {r.score.accept_length:.2f} over "
                    f"{self.prompts} prompts), so nothing says the draft works with it."
                )
            elif self.is_named(r) and self.determined:
                lines.append(f"{who} reads the config as the draft was trained: OK.")
            elif self.is_named(r):
                lines.append(
                    f"{who} reads the config as one of the best-scoring wirings: nothing found wrong."
                )
            else:
                lines.append(
                    f"{who} reads the config as [{r.wiring.describe()}]: NOT what the draft was trained "
                    f"for (predicted accept length {r.score.accept_length:.2f} instead of "
                    f"{best.score.accept_length:.2f})."
                )
        return lines

    def _standing(self, result: WiringResult) -> str:
        if result is self.best:
            return "the best of the wirings tried"
        if result in self.ties:
            return "within the noise of the best"
        return f"below the best's {self.best.score.accept_length:.2f}"

    def as_dict(self) -> dict:
        best = [self.best, *self.ties] if self.best else []
        return {
            "backend": self.backend,
            "num_steps": self.steps,
            "prompts": self.prompts,
            "new_tokens": self.new_tokens,
            "status": "determined" if self.determined else "undetermined",
            "undetermined_because": self.undetermined_because,
            "trained_for": list(self.best.wiring.indices) if self.determined else None,
            "best": [list(r.wiring.indices) for r in best],
            "plugin_ok": self.plugin_ok,
            "wirings": [r.as_dict() for r in self.results],
            "verdict": self.verdict(),
        }

    def table(self) -> str:
        nw = max(len(r.wiring.name) for r in self.results)
        tw = max((len(r.wiring.describe()) for r in self.scored), default=10)
        head = f"{'wiring':{nw}}  {'tensors (in the draft order)':{tw}}  {'top-1':>5}  {'accept':>6}  per-step acceptance"
        lines = [head, "-" * len(head)]
        for r in self.results:
            if r.score is None:
                lines.append(f"{r.wiring.name:{nw}}  {r.wiring.failure[:200]}")
                continue
            steps = " ".join(f"{a:.2f}" for a in r.score.acceptance)
            mark = "  <- best" if r is self.best else "  <- tied" if r in self.ties else ""
            lines.append(
                f"{r.wiring.name:{nw}}  {r.wiring.describe():{tw}}  {r.score.agreement:5.3f}  "
                f"{r.score.accept_length:6.2f}  {steps}{mark}"
            )
        return "\n".join([*lines, "", *self.verdict()])
