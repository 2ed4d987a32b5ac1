"""Defaults of the command line shared by its argument parser and its commands."""

#: Below this many files ``build`` parses in one worker process by default: starting one
#: per CPU costs more than parsing a few headers.
POOL_THRESHOLD = 16
