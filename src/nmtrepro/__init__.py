"""nmtrepro: one Snakemake workflow reproducing four NMT papers on source-side structure."""

__version__ = "0.1.0"
