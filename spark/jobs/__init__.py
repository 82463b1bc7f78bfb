"""spark-submit entry points: each main() turns its arguments into a spark.compaction or
spark.lag request and runs it."""
