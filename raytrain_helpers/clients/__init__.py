"""Thin wrappers over the outside systems: Kubernetes, Helm, AWS (boto3), eksctl and the Ray Jobs API."""
