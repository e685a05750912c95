"""Datasets: reading LETOR files, writing ULTRA data directories, synthetic data."""
