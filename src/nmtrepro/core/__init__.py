"""Helpers every stage uses: atomic files and input errors, the torch runtime, vocabularies, text."""
