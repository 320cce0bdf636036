"""The trainer side: packing threads into sequences, and the rows packed."""
