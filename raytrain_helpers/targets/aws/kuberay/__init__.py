"""Step 04 on aws (notebook 04_kuberay): the KubeRay operator and the RayCluster, its pods and their progress,
the job server notebook 05 submits to, and 06's infrastructure rows read from Kubernetes.
"""
