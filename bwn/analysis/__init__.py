"""A run's results: report, metrics, fidelity checks, claims and statistics."""
