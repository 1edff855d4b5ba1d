"""Learning-rate schedule: linear warmup, then inverse square root decay (Vaswani et al. 2017).

With peak = d_model^-0.5 * warmup^-0.5 this is exactly the "Noam" schedule; config gives the peak.
"""
from __future__ import annotations


def inverse_sqrt(step: int, peak_lr: float, warmup: int) -> float:
    """Learning rate for update `step` (1-based): peak_lr * min(step / warmup, sqrt(warmup / step))."""
    step = max(step, 1)
    return peak_lr * min(step / warmup, (warmup / step) ** 0.5)
