"""ULTRA learning-algorithm adapters (thin classes over ultra_multr's torch math)."""
