"""Batch sweeps of agent sessions, their results store, the paper's metrics, and reports."""
