"""The Zarr v3 model both parsers build on: chunk grids, array metadata, codec chains and
the metadata of concatenated arrays.
"""
