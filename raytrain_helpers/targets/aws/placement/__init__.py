"""Step 01 on aws (notebook 01_capacity): where the GPU nodes can run - quotas, offerings by AZ, Spot
scores, Capacity Blocks, the optional On-Demand reservation probe - and what it will cost. Creates nothing
unless the probe is asked for.
"""
