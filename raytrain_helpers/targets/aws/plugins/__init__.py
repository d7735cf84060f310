"""Step 03 on aws (notebook 03_plugins): the NVIDIA and EFA device plugins that make GPUs and EFA interfaces
schedulable on the GPU nodes, installed with Helm, and who owns each plugin DaemonSet.
"""
