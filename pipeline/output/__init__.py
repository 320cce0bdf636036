"""What a job leaves on disk (DESIGN §7): Parquet shards, the shipped tokenizer, the
manifest, the dataset card, and the atomic files they are written through."""
