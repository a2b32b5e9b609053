"""Simulated networks for the transport and the sender algorithms (tests and benchmarks)."""
