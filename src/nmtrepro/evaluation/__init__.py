"""The evaluate stage: beam search, BLEU and paired significance."""
