"""Pure functions of DataFrames: no reads, no writes, no session state."""
