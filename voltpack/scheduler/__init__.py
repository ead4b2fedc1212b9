"""The scheduling mechanism: filter, score, select node and GPUs, gangs all-or-nothing."""
