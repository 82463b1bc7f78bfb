"""Autoscaling: the decision (pure), the leader's step that applies it, the scale
backends (log, Kubernetes), and the policy an operator sets per group."""
