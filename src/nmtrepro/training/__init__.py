"""The train stage: batches, the loss, the learning-rate schedule, checkpoints and the trainer."""
