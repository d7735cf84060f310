"""The training job: the per-worker loop and the Ray job entrypoint (runs on the cluster, not in the notebook)."""
