"""The engine harness's pure helpers (``harness.engine_run``): where an output
first leaves its reference, and which output tokens plain decoding and speculation must agree on
(the exact GPU tests rely on these); what stopped a failed engine; a free port for each engine; and
the command an engine process is started with."""

import random
import socket
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.engine_run import (
    DERIVED_PORTS,
    TILE,
    _bindable,
    accept_mean,
    differences,
    failure,
    finished,
    free_port,
    launch_environment,
    missing_result,
    regime,
)

tokens = st.lists(st.integers(0, 9), min_size=1, max_size=12)


@given(st.lists(tokens, min_size=1, max_size=6), st.data())
def test_differences_name_the_first_differing_token_of_each_output(expected, data):
    outputs, want = [], []
    for prompt, ref in enumerate(expected):
        cut = data.draw(st.integers(0, len(ref)))  # outputs[prompt] equals ref before `cut`
        out = list(ref)
        if cut < len(ref):
            out[cut] = ref[cut] + 1
            want.append((prompt, cut, ref[cut] + 1, ref[cut]))
        outputs.append(out)
    assert differences(outputs, expected) == want


def test_a_shorter_output_differs_where_it_ends():
    assert differences([[1, 2]], [[1, 2, 3]]) == [(0, 2, None, 3)]
    assert differences([[1, 2, 3]], [[1, 2]]) == [(0, 2, 3, None)]


def test_differences_past_the_limit_are_not_compared():
    assert differences([[1, 2, 9], [5, 6]], [[1, 2, 3], [5, 7]], limit=[2, 2]) == [(1, 1, 6, 7)]


def test_differences_refuse_mismatched_lengths():
    with pytest.raises(ValueError, match="2 outputs against 1 expected"):
        differences([[1], [2]], [[1]])


@given(st.lists(st.integers(1, 300), min_size=1, max_size=8))
def test_the_regime_is_every_token_whose_logits_attended_at_most_one_decode_tile(lengths):
    """Output token i of a prompt of length P attends P + i keys; the first token is always in."""
    limits = regime([[0] * n for n in lengths])
    for n, limit in zip(lengths, limits):
        assert limit >= 1
        if limit > 1:
            assert n + (limit - 1) <= TILE < n + limit


SCHEDULER_CRASH = """[2026-11-29 19:30:01 DP1 TP1] Scheduler hit an exception: Traceback (most recent call last):
  File "/x/decode_attention.py", line 1221, in decode_attention_fwd
    assert q.shape[0] <= kv_indptr.shape[0] - 1
AssertionError
[2026-11-29 19:30:01] Received sigquit from a child process. It usually means the child failed.
"""


def test_failure_is_the_last_exception_line_with_numbers_masked():
    plugin = {"error": "plugin-x: no result after 300 s (modes finished: [])", "log": SCHEDULER_CRASH}
    stock = {"error": "stock-x: no result after 300 s", "log": SCHEDULER_CRASH.replace("DP1 TP1", "DP0 TP0")}
    assert failure(plugin) == failure(stock) == "decode_attention.py in decode_attention_fwd: AssertionError"
    oom = {
        "error": "",
        "log": "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    }
    assert failure(oom) == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate N.N GiB"
    assert failure({"error": "ValueError: bad 12", "log": "no exception here"}) == "ValueError: bad N"


def test_the_same_exception_raised_elsewhere_is_another_failure():
    elsewhere = SCHEDULER_CRASH.replace("decode_attention.py", "eagle_worker_v2.py").replace(
        "decode_attention_fwd", "forward_draft_extend"
    )
    assert failure({"log": elsewhere}) == "eagle_worker_v2.py in forward_draft_extend: AssertionError"
    assert failure({"log": elsewhere}) != failure({"log": SCHEDULER_CRASH})
    # a chained traceback: the place is the one nearest the last exception line
    chained = (
        SCHEDULER_CRASH
        + "\nDuring handling of the above exception, another exception occurred:\n"
        + (
            '  File "/x/scheduler.py", line 9, in event_loop\n    raise RuntimeError("scheduler died 3 times")\n'
            "RuntimeError: scheduler died 3 times\n"
        )
    )
    assert failure({"log": chained}) == "scheduler.py in event_loop: RuntimeError: scheduler died N times"


def test_a_missing_result_says_whether_the_engine_was_killed_or_ended_by_itself():
    assert missing_result("plugin-x", -9, 300, ["all"]) == (
        "plugin-x: killed after 300 s without a result (modes finished: ['all'])"
    )
    ended = missing_result("stock-x", -9, None, [])
    assert ended == "stock-x: the engine process ended with code -9 without a result (modes finished: [])"
    assert "300" not in ended


def test_a_port_in_use_is_a_launch_environment_failure():
    error = "ValueError: detokenizer_port at 30235 is not available in 30 seconds. detokenizer_port is used"
    assert launch_environment({"error": error, "log": ""}).startswith(
        "detokenizer_port at 30235 is not available"
    )
    assert launch_environment({"error": "", "log": "OSError: [Errno 98] Address already in use"})
    assert launch_environment({"error": "", "log": SCHEDULER_CRASH}) is None


def test_free_port_leaves_the_dp_attention_ports_free_too():
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    blocked = taken.getsockname()[1]
    try:
        # the first candidate (blocked - 233) has a derived port in use: it must be passed over; the
        # second is a range found free just now (a fixed offset from ``blocked`` lies in the
        # ephemeral range, where a busy machine's connections can hold one of its ports)
        free = next(p for p in range(20000, 30000, 16) if all(_bindable(p + d) for d in (0, *DERIVED_PORTS)))
        candidates = iter([blocked - DERIVED_PORTS[0], free])
        fake = random.Random()
        fake.randrange = lambda *a: next(candidates)
        port = free_port(fake)
    finally:
        taken.close()
    assert port == free


def test_free_port_stays_below_the_ephemeral_range_and_clear_of_taken_ports():
    fake = random.Random()
    calls = []

    def randrange(low, high):
        calls.append((low, high))
        return [15000, 15100, 15400][len(calls) - 1]

    fake.randrange = randrange
    port = free_port(fake, taken=[15000 - 50], floor=32768)
    assert port == 15400  # 15000 and 15100 overlap the derived ports of 14950
    assert all(high + DERIVED_PORTS[-1] < 32768 for _, high in calls)


def test_finished_returns_the_results_or_names_the_one_that_failed():
    results = {"a": {"ok": True}, "b": {"ok": False, "error": "boom", "log": "x" * 5000 + "tail"}}
    assert finished(results, "a") == [{"ok": True}]
    with pytest.raises(AssertionError, match=r"b: boom\nx+tail$"):
        finished(results, "a", "b")


def test_accept_mean_skips_missing_figures_and_refuses_none_at_all():
    assert accept_mean([3.0, None, 2.0]) == 2.5
    with pytest.raises(AssertionError, match="no spec_accept_length"):
        accept_mean([None, None])


def test_an_engine_process_runs_this_module_from_the_root_the_harness_came_from(tmp_path, monkeypatch):
    """``launch`` starts ``python -m harness.engine_run`` in the repository root, where that name
    imports this very file (whatever the caller's working directory), in its own session."""
    import subprocess
    import sys

    from harness import engine_run

    seen = {}
    monkeypatch.setattr(subprocess, "Popen", lambda command, **kwargs: seen.update(command=command, **kwargs))
    engine_run.launch("e", {"engine": {"port": 1}}, tmp_path)
    assert seen["command"][:3] == [sys.executable, "-m", "harness.engine_run"]
    assert seen["command"][3] == str(tmp_path / "e.json")
    assert (Path(seen["cwd"]) / "harness" / "engine_run.py").samefile(engine_run.__file__)
    assert seen["start_new_session"] and seen["env"]["SGLANG_PYSPY_DUMP_BEFORE_CRASH"] == "0"
