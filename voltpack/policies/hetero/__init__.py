"""Allocation policies for heterogeneous training clusters (Gavel-style rounds): fairness,
efficiency, completion time, FIFO, and their registry."""
