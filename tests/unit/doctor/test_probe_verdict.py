"""What `probe` may conclude: it names the trained wiring only when it scored the wiring the config
describes and at least one other, and the best is clear of the rest; otherwise "undetermined", with
the reason. Synthetic scores: no model is run."""

from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.doctor.chain import ChainScore
from sglang_eagle3_embed.doctor.report import ProbeReport, WiringResult
from sglang_eagle3_embed.doctor.wirings import DEFAULTS, PLUGIN, STOCK, Wiring, candidate_wirings


def result(names, indices, accept=None, deficit=0.0, se=0.01, failure=None, gain_se=0.01):
    """A wiring's scores; per prompt, its accepted draft tokens average ``accept - 1``."""
    wiring = Wiring(tuple(names), indices, failure)
    score = None if accept is None else ChainScore(0.9, (0.9,), accept, 100)
    gain = 0.0 if accept is None else accept - 1
    return WiringResult(wiring, score, deficit, se, gain, gain_se)


def report(*results) -> ProbeReport:
    return ProbeReport(list(results), steps=7, prompts=128, new_tokens=40, backend="hf")


STOCK_FAILS = result(
    [STOCK], None, failure="fails at startup: RuntimeError: captured 2 of 3 aux hidden states"
)


def test_a_clear_winner_that_the_config_describes_is_named():
    r = report(
        result([PLUGIN, "ids as layer outputs"], (0, 3, 5), 5.6),
        STOCK_FAILS,
        result([DEFAULTS], (2, 3, 4), 2.2, deficit=3.4),
    )
    assert r.determined
    assert r.verdict()[0].startswith("The draft was trained for: embedding output, output of layer 2")
    assert r.as_dict()["trained_for"] == [0, 3, 5]


def test_a_tie_within_the_noise_names_no_winner():
    r = report(
        result([PLUGIN, "ids as layer outputs"], (0, 3, 5), 5.59),
        result(["layers off by one (later)"], (0, 4, 6), 5.54, deficit=0.05, se=0.04),
        STOCK_FAILS,
        result([DEFAULTS], (2, 3, 4), 2.2, deficit=3.4),
    )
    assert not r.determined
    assert r.verdict()[0].startswith("Undetermined")
    assert "layers off by one (later)" in r.verdict()[0]
    assert not any(line.startswith("The draft was trained for") for line in r.verdict())
    data = r.as_dict()
    assert data["trained_for"] is None and data["status"] == "undetermined"
    assert [0, 3, 5] in data["best"] and [0, 4, 6] in data["best"]
    assert r.plugin_ok  # the plugin's reading is among the best: nothing found wrong


def test_one_scored_wiring_is_undetermined_and_the_plugins_refusal_is_a_finding():
    """A draft trained on [-1, 2, 4] whose config was edited to [-1, 2, 9] for a 7-layer target:
    only SGLang's defaults can be scored, which says nothing about what the draft was trained on."""
    r = report(
        result([PLUGIN], None, failure="refuses to start: out-of-range entries [9]"),
        result([STOCK, DEFAULTS], (2, 3, 4), 2.18),
    )
    assert not r.determined
    assert "only one wiring" in r.verdict()[0]
    assert not any(line.startswith("The draft was trained for") for line in r.verdict())
    assert not r.plugin_ok


def test_a_best_wiring_the_config_does_not_describe_is_not_called_trained():
    r = report(
        result([PLUGIN], None, failure="refuses to start: out-of-range entries [9]"),
        result(["layer 8 read as layer 7"], (0, 3, 8), 4.0),
        result([STOCK, DEFAULTS], (2, 3, 4), 2.18, deficit=1.8),
    )
    assert not r.determined
    assert "the config's own reading could not be scored" in r.verdict()[0]


def test_candidates_come_from_the_ids_when_the_plugin_refuses_the_config():
    """[-1, 2, 6] on a 7-layer target: the plugin refuses (layer 6's output has no capture point),
    but the ids still say where to look: each id moved by one, -1 as the embedding."""
    wirings = {w.name: w for w in candidate_wirings({"eagle_config": {IDS_FIELD: [-1, 2, 6]}}, 7)}
    scored = {w.indices for w in wirings.values() if w.indices is not None}
    assert wirings[PLUGIN].indices is None and "refuses" in wirings[PLUGIN].failure
    assert (0, 3, 6) in scored  # id 6 one earlier: embedding, layers 2 and 5
    assert (1, 3, 6) not in scored  # two ids moved at once is not a neighbour of the config
    assert len(scored) >= 3, sorted(scored)


def test_each_id_moved_by_one_is_a_candidate():
    wirings = candidate_wirings({"eagle_config": {IDS_FIELD: [-1, 2, 4]}}, 7)
    scored = {w.indices for w in wirings if w.indices is not None}
    for moved in [(0, 2, 5), (0, 4, 5), (0, 3, 4), (0, 3, 6), (1, 3, 5)]:
        assert moved in scored, moved


def test_a_plugin_scored_alone_or_over_one_prompt_gets_no_verdict():
    alone = report(result([PLUGIN, "ids as layer outputs"], (0, 3, 5), 5.6), STOCK_FAILS)
    assert not alone.plugin_ok and "only one wiring" in alone.verdict()[0]
    assert not any("nothing found wrong" in line or ": OK." in line for line in alone.verdict())
    one = ProbeReport(
        [
            result([PLUGIN, "ids as layer outputs"], (0, 3, 5), 5.6),
            result([DEFAULTS], (2, 3, 4), 2.2, deficit=3.4, se=0.0),
        ],
        steps=7, prompts=1, new_tokens=40, backend="hf",
    )  # fmt: skip
    assert not one.determined and "one prompt" in one.verdict()[0] and not one.plugin_ok
    assert not any("nothing found wrong" in line or ": OK." in line for line in one.verdict())


def test_wirings_that_get_nothing_accepted_give_no_verdict():
    """A draft trained for another target: every wiring ties at accept length 1.00. Tied with the
    best is not evidence when the best gets no draft token accepted."""
    r = report(
        result([PLUGIN, "ids as layer outputs"], (0, 3, 5), 1.0, gain_se=0.0),
        result(["layers off by one (later)"], (0, 4, 6), 1.0, deficit=0.0, se=0.0, gain_se=0.0),
        STOCK_FAILS,
    )
    assert not r.determined and "no wiring gets draft tokens accepted" in r.verdict()[0]
    assert not r.plugin_ok
    assert not any("nothing found wrong" in line or ": OK." in line for line in r.verdict())
    assert any("no draft tokens accepted beyond the noise" in line for line in r.verdict())


def test_accepted_tokens_within_the_noise_of_zero_are_not_evidence():
    weak = report(
        result([PLUGIN, "ids as layer outputs"], (0, 3, 5), 1.05, gain_se=0.04),
        result(["layers off by one (later)"], (0, 4, 6), 1.04, deficit=0.01, se=0.02, gain_se=0.04),
    )
    assert not weak.plugin_ok and "no wiring gets draft tokens accepted" in weak.verdict()[0]
    clear = report(
        result([PLUGIN, "ids as layer outputs"], (0, 3, 5), 1.3, gain_se=0.04),
        result(["layers off by one (later)"], (0, 4, 6), 1.29, deficit=0.01, se=0.02, gain_se=0.04),
    )
    assert clear.plugin_ok and "nothing found wrong" in clear.verdict()[1]


def test_defaults_read_for_want_of_ids_are_never_nothing_wrong():
    """A draft config without ids: the plugin and stock read SGLang's default layers. Best, tied or
    below, they do not say what the draft was trained on; the fix is to write the ids."""
    defaults = [PLUGIN, STOCK, DEFAULTS]
    for r in (
        report(
            result(defaults, (2, 3, 4), 2.6),
            result(["layer 1 read as layer 0"], (1, 3, 4), 2.8, deficit=-0.2, se=0.1),
        ),
        report(
            result(defaults, (2, 3, 4), 4.8),
            result(["layers off by one (later)"], (3, 4, 5), 2.0, deficit=2.8),
        ),
    ):
        assert not r.plugin_ok and not r.determined
        assert "names no aux layer ids" in r.verdict()[0]
        lines = [line for line in r.verdict() if "takes no ids from the config" in line]
        assert len(lines) == 2 and all("eagle_aux_hidden_state_layer_ids" in line for line in lines)
        assert not any("nothing found wrong" in line or ": OK." in line for line in r.verdict())


def test_stock_ignoring_top_level_ids_is_named_as_reading_defaults():
    r = report(
        result([PLUGIN, "ids as layer outputs"], (0, 3, 5), 5.6),
        result([STOCK, DEFAULTS], (2, 3, 4), 5.5, deficit=0.1, se=0.1),
    )
    assert r.plugin_ok
    assert any(line.startswith("stock SGLang takes no ids from the config") for line in r.verdict())
