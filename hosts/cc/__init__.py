"""Sender algorithms, one module each, behind hosts/cc/base.py."""
