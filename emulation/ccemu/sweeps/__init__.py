"""Sweeps: one experiment at every point of a parameter grid, here or across machines."""
