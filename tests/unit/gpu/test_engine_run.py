"""The GPU tests' pure helpers (``tests/gpu/engine_run.py``): margins from SGLang's top logprobs and
the first point where an output leaves its reference, and which of those only a bug explains (the
GPU lossless tests rely on these); what stopped a failed engine; and a free port for each engine."""

import random
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.gpu.engine_run import (
    DERIVED_PORTS,
    NEAR_TIE,
    divergences,
    failure,
    free_port,
    launch_environment,
    margins,
    missing_result,
    unexplained,
)


def test_margins_are_top1_minus_top2_whatever_the_entry_order():
    meta = {"output_top_logprobs": [[(-0.1, 5, None), (-2.6, 7, None)], [(-1.5, 3, None), (-0.7, 4, None)]]}
    assert margins(meta) == pytest.approx([2.5, 0.8])


def test_a_position_without_top_logprobs_has_no_margin():
    meta = {"output_top_logprobs": [[(-0.1, 5, None), (-2.6, 7, None)], None]}
    assert margins(meta) == pytest.approx([2.5, None])


def test_margins_without_top_logprobs_are_none():
    assert margins({}) is None
    assert margins({"output_top_logprobs": []}) is None


def test_margins_refuse_a_single_candidate():
    with pytest.raises(ValueError, match="top_logprobs_num >= 2"):
        margins({"output_top_logprobs": [[(-0.1, 5, None)]]})


tokens = st.lists(st.integers(0, 9), min_size=1, max_size=12)


@given(st.lists(tokens, min_size=1, max_size=6), st.data())
def test_divergences_name_the_first_differing_token_and_its_margin(expected, data):
    outputs, gaps, want = [], [], []
    for prompt, ref in enumerate(expected):
        gap = [float(i) for i in range(len(ref))]  # the margin at position i is i
        cut = data.draw(st.integers(0, len(ref)))  # outputs[prompt] equals ref before `cut`
        out = list(ref)
        if cut < len(ref):
            out[cut] = ref[cut] + 1
            want.append((prompt, cut, float(cut)))
        outputs.append(out)
        gaps.append(gap)
    assert divergences(outputs, expected, gaps) == want


def test_a_shorter_output_diverges_where_it_ends():
    assert divergences([[1, 2]], [[1, 2, 3]], [[0.5, 0.5, 0.5]]) == [(0, 2, 0.5)]
    assert divergences([[1, 2, 3]], [[1, 2]], [[0.5, 0.5]]) == [(0, 2, None)]


def test_divergences_refuse_mismatched_lengths():
    with pytest.raises(ValueError, match="2 outputs, 1 expected"):
        divergences([[1], [2]], [[1]], [[0.0]])


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=8))
def test_a_difference_is_explained_by_a_near_tie_or_by_plain_decoding_itself(cases):
    """Each prompt's output leaves the reference at position 1, at a near-tie or not, and plain
    decoding elsewhere (``others``) made the same output or not: only sure and unmade ones remain."""
    expected = [[1, 2, 3] for _ in cases]
    outputs = [[1, 9, 3] for _ in cases]
    gaps = [[3.0, NEAR_TIE / 2 if tie else NEAR_TIE, 3.0] for tie, _ in cases]
    other = [list(out) if made else list(ref) for (_, made), out, ref in zip(cases, outputs, expected)]
    want = [(p, 1, NEAR_TIE) for p, (tie, made) in enumerate(cases) if not tie and not made]
    assert unexplained(outputs, expected, gaps, [other]) == want
    assert unexplained(outputs, expected, gaps) == [
        (p, 1, g[1]) for p, g in enumerate(gaps) if g[1] >= NEAR_TIE
    ]


def test_a_difference_past_the_margins_is_never_a_near_tie():
    assert unexplained([[1, 2, 3]], [[1, 2]], [[0.0, 0.0]]) == [(0, 2, None)]
    assert unexplained([[1, 2, 3]], [[1, 2]], [[0.0, 0.0]], [[[1, 2, 3]]]) == []


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
        # the first candidate (blocked - 233) has a derived port in use: it must be passed over
        candidates = iter([blocked - DERIVED_PORTS[0], blocked + 1000])
        fake = random.Random()
        fake.randrange = lambda *a: next(candidates)
        port = free_port(fake)
    finally:
        taken.close()
    assert port == blocked + 1000
