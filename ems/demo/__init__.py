"""The IoT pipeline of the reference design, run by `make run` (`ems demo`): gateways
publish readings keyed by project_id, a cluster group of data handlers stores them, and
one handler joins and another leaves while it runs."""

from ems.demo.pipeline import DemoOptions, run_demo

__all__ = ["DemoOptions", "run_demo"]
