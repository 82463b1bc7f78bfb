"""Job entry points: each main() does the I/O around pure transforms."""
