"""Bundled, offline model cards: real Hub config snapshots (no weights) with their provenance.

Each folder is laid out like the Hub repo (``model_index.json`` and one folder per component)
plus ``card.yaml`` (name, aliases, Hub id) and ``PROVENANCE.json``.
"""
