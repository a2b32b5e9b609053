"""Host agents: the reliable UDP transport (bwn-send, bwn-recv) and the sender algorithms."""
