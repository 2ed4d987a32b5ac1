"""The conformance suite: every tool run over the real-file corpus, every array compared
with the native reader (``conformance.py``), and the fuzzing machinery the tests and the
long fuzz run share (``fuzz/``). See ``conformance/README.md``."""
