"""The data stage: datasets, downloads and recipes, preparation (tokenize, BPE, binarize), parsing."""
