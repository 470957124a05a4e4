"""The test and benchmark harness, never imported by a server or by the command line.

Shipped with the package, as SGLang ships ``popen_launch_server`` in ``sglang/test/test_utils.py``,
so that the tests, the benchmarks and the tools import it by its package name:

- ``engine_run``: one SGLang ``Engine`` per process (``python -m
  sglang_eagle3_embed.testing.engine_run RESULT JOB``), engines side by side on one GPU
  (``run_pool``), and the pure comparisons the GPU tests make;
- ``server_run``: ``python -m sglang.launch_server`` over HTTP, and SGLang's own serving client
  run in this process (``run_client``) with the datasets it reads;
- ``load_run``: the load and faults scenario against one server;
- ``rule_examples``: for every startup rule, a launch that fires it and a close one that does not.
- ``acceptance_runs``: the GPU acceptance runs by name, for their test and their table.

It may import the core and the doctor; nothing of the package imports it
(``tests/unit/test_layout.py``).
"""
