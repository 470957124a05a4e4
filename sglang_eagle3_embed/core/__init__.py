"""The pure core: what the plugin decides, as plain Python (no torch, no sglang), one subpackage
per concern. Each imports only the shared modules here and the subpackages before it:

- shared: ``errors`` (with the refusal messages they carry), ``findings``, ``rule_ids``,
  ``releases`` (the supported SGLang releases and what differs between them), ``atomic``;
- ``capture``: the capture vocabulary (id conventions, a draft config to a capture plan, stock
  SGLang's reading of the ids): all a TP/DP worker imports of the core;
- ``readers``: model folders, hub ids, override arguments, weight coverage, a launch as data;
- ``pd``: what each side of a prefill/decode split feeds the draft;
- ``rules``: the startup rules, their registry and table, and the rules of a PD pair;
- ``canary``: the expectations file and the verdict on a served accept length.

``tests/unit/test_layout.py`` keeps it pure and holds these boundaries.
"""
