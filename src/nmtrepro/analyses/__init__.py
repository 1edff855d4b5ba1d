"""Analyses beyond corpus BLEU, one module per kind: each measures and renders its paper figure or table."""
