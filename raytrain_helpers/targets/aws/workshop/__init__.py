"""Workshops on one shared EKS cluster (``raytrain-tutorial handout``, ``aws.shared_cluster``): an attendee
confined to their namespace, the facilitator's view of every attendee, and each attendee's checkpoint storage.
"""
