"""The wire formats: the BWN header, its Scapy layer and its test vectors."""
