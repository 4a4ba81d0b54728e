"""Benchmarks and checks run by hand (``python scripts/NAME.py``); a package so that tests import their
helpers as ``scripts.NAME``."""
