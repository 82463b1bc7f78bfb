"""The stream job (`ems spark stream`, spark/jobs/stream.py): a Structured Streaming query
over the demo's readings topic, per-project windows with a watermark, written to MySQL
(reading_window, upserted per micro-batch) and to Parquet (one directory per batch)."""
