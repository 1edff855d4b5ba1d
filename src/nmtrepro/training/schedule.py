"""Learning-rate schedules, each a linear warmup to the peak and then:

- `inverse_sqrt`: decay as 1/sqrt(step) (Vaswani et al. 2017); with peak = d_model^-0.5 *
  warmup^-0.5 this is exactly the "Noam" schedule; config gives the peak.
- `constant`: stay at the peak (paper C: Adam "with initial learning rate as 0.001", no decay named).
"""
from __future__ import annotations


def inverse_sqrt(step: int, peak_lr: float, warmup: int) -> float:
    """Learning rate for update `step` (1-based): peak_lr * min(step / warmup, sqrt(warmup / step))."""
    step = max(step, 1)
    return peak_lr * min(step / warmup, (warmup / step) ** 0.5)


def constant(step: int, peak_lr: float, warmup: int) -> float:
    """Learning rate for update `step` (1-based): peak_lr * min(step / warmup, 1)."""
    return peak_lr * min(max(step, 1) / warmup, 1.0)


SCHEDULES = {"inverse_sqrt": inverse_sqrt, "constant": constant}
