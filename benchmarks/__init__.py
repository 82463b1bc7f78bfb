"""ems benchmarks, run by `make bench` (`python -m benchmarks`); never collected by pytest."""
