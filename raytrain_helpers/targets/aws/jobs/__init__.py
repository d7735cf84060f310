"""Steps 05-07 on aws (notebooks 05_train, 06_verify, 07_benchmark): the training job's defaults on EKS
(:mod:`.defaults`), the workers' log files read inside the pods (:mod:`.logs`), and 06's infrastructure rows
(:mod:`.verify`: allocatable GPUs and EFA, ``fi_info`` in the worker pods, the pods, the checkpoint in S3).
"""
