"""Ranking of the nodes that fit, by each scheduler's own scoring (Volcano, Koordinator, HAMi)."""
