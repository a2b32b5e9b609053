"""P4Runtime controller: pipeline push, forwarding, link capacities and schedules, telemetry."""
