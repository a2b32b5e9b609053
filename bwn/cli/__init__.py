"""The `bwn` command line."""
