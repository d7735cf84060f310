"""Step 02's checkpoint storage on aws (notebook 02_cluster): the S3 bucket, the storage role, its EKS Pod
Identity association, the in-pod check that proves them before the GPU node group is created; notebook 08
removes them.
"""
