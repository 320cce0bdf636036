"""The trainer side: packing threads into sequences, and batches of an output folder for a
training loop (numpy; `pipeline.loader.torch` wraps them for torch)."""

from pipeline.loader.output_loader import LoaderError, OutputLoader
from pipeline.packing.best_fit import BestFitPacker, pack_rows

__all__ = ["BestFitPacker", "LoaderError", "OutputLoader", "pack_rows"]
