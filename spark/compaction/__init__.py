"""Compaction of the consumption log (topic_group_log): archive, summarize, delete.

request: what to compact, checked before Spark starts; steps and deletes: the resumable
steps of one run; runner: whole invocations (once, or at an interval in one session).
"""
