"""Probing suite (SentEval protocol, Conneau et al. 2018): task data, sentence vectors, classifiers."""
