"""The ems sink for Spark: `df.writeStream.format("ems")` and `df.write.format("ems")`.

Rows of Kafka's sink shape (value, and optional key, topic, partition, headers) are
published through the producer's write path (ems.Producer.send_once: the same checks and
typed errors as send_batch), each write named by a token derived from the query, the
micro-batch, the task's partition and the row (rows.py), so that a task Spark runs again,
or a micro-batch it replays after a restart, stores nothing twice. The data source that
registers it is spark.source's (format "ems" reads and writes); docs/spark.md has the
options.
"""
