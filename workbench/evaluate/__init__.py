"""Evaluation: build, static SASS, correctness, dynamic proof and timing of one candidate."""
