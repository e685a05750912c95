"""Training from logged sessions (real click logs) through ULTRA's main.py."""
