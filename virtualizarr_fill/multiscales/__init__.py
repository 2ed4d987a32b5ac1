"""Multiscale groups: the conventions' attributes and multiscale trees of many files.
"""
