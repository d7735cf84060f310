"""Steps 05-07 on aws (notebooks 05_train, 06_verify, 07_benchmark): the training job's defaults on EKS, the
workers' log files read inside the pods, and the EFA tools 06 runs there.
"""
