"""Defaults of the command line shared by its argument parser and its commands."""

#: From this many input files on, ``build`` parses in worker processes by default.
POOL_THRESHOLD = 16
