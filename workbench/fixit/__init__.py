"""Fixit: repair pairs (a failed turn, then a later passed turn) from sessions and sweeps, as SFT data.

Every fixed kernel in a row passed the evaluator; every row says where it came from.
"""
