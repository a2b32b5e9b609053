"""bwn: bandwidth notification (EBN, OBP) on programmable switches, and the senders that use it."""
