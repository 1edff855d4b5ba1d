"""nmtrepro: one Snakemake workflow reproducing four NMT papers on source-side structure.

What a run makes is usable outside it: `nmtrepro.load(path)` loads a model bundle
(results/<scale>/bundle/<experiment>), whose `translate(lines)` turns raw lines into translations.
"""

__version__ = "0.1.0"


def load(path, device: str = "auto", threads: int = 0):
    """A model bundle ready to translate (evaluation/translate.py's Translator), its model on `device`:
    `load(path).translate(["A line."])`, `.nbest(lines, 5)`, `.bundle` (model, vocabularies, settings).
    Imported on first use, so that `import nmtrepro` stays free of torch."""
    from .evaluation.translate import load as load_translator
    return load_translator(path, device, threads)
