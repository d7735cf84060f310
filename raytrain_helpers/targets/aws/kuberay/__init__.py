"""Step 04 on aws (notebook 04_kuberay): the KubeRay operator (Helm chart) and the RayCluster, its pods and their
progress read from Kubernetes Events, the storage access checked from every Ray pod (:mod:`.access`), and the job
server (a port-forward to the head's Ray Jobs API) that notebooks 05-07 submit to.
"""
