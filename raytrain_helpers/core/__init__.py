"""The bottom layer: settings, plain-text tables, success criteria, paths and shared constants.

Nothing here imports any other part of the package.
"""
