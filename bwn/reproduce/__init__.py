"""`bwn reproduce`: a paper's evaluation grid run over seeds and judged."""
