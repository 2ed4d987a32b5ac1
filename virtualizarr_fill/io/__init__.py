"""File objects over object stores, URLs, store registries, deadlines, isolated workers,
batching and byte ranges.
"""
