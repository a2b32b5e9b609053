"""The experiment as declared: the scenario model, its resolver, and link schedules."""
