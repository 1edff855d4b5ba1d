"""The report stage: results tables beside the papers' numbers, and the shared table and figure writers."""
