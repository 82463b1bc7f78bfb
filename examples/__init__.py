"""Runnable examples the docs include and the tests run."""
