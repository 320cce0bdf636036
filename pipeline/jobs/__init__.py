"""Jobs: a source, stages and a sink, run end to end (pack so far)."""
