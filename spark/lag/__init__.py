"""The consumer-group lag report over a sliding window of offset snapshots.

request: what to report on, checked before Spark starts; report: the snapshots read and the
report rows stored; outputs: the optional file and charts; runner: one whole invocation.
"""
