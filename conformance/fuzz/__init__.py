"""Mutations of corpus files and the verdict on each, in a capped worker process: used by
the fuzz tests (``tests/tiff/test_fuzz_tiff.py``, ``tests/hdf5/test_fuzz_hdf5.py``) and by
the long run (``conformance/fuzz_long.py``)."""
