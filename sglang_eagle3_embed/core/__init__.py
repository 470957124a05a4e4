"""The pure core: what the plugin decides, as plain Python (no torch, no sglang).

``ids`` (id conventions), ``draft_config`` (a draft config becomes a capture plan), ``deployment``
and ``rules`` (the startup rules over a snapshot of a launch), ``findings``, ``errors`` (with the
refusal messages they carry) and ``releases`` (the supported SGLang releases and what differs
between them). ``tests/unit/test_layout.py``
keeps it pure.
"""
