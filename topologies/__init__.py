"""Mininet topologies of BMv2 switches for each paper scenario."""
