"""The test and benchmark harness: outside the package, never installed, never imported by it.

Everything that uses it (``tests/``, ``benchmarks/``, ``tools/``) runs from a checkout, so it lives
beside them at the repository root and imports as ``harness``:

- ``engine_run``: one SGLang ``Engine`` per process (``python -m harness.engine_run RESULT JOB``,
  started from the repository root), engines side by side on one GPU (``run_pool``), and the pure
  comparisons the GPU tests make;
- ``server_run``: ``python -m sglang.launch_server`` over HTTP, and SGLang's own serving client
  run in this process (``run_client``) with the datasets it reads;
- ``load_run``: the load and faults scenario against one server;
- ``rule_examples``: for every startup rule, a launch that fires it and a close one that does not.
- ``acceptance_runs``: the GPU acceptance runs by name, for their test and their table.

It imports the package (the core and the doctor); never ``tests``, ``tools`` or ``benchmarks``; and
nothing of the package imports it (``tests/unit/test_layout.py``).
"""
