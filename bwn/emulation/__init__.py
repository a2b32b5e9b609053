"""Running an experiment: the runner, the interactive session, captures, namespaces."""
