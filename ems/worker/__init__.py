"""`ems worker`: a handler's path, a group and its topics, run by one process or by a
supervisor of several (ems.worker.supervisor); the options in ems.worker.options."""
