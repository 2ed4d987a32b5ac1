"""HDF5's on-disk structures, decoded from the file's bytes with NumPy.

The parser reads and checks these itself, before any libhdf5 call that would follow
them: superblock facts and object headers (``structures``, ``layout_message``,
``object_storage``), group symbol tables (``symbol_table``), version 2 B-trees and
fractal heaps of dense links and attributes (``btree_v2``, ``fractal_heap``), chunk
indexes (``chunk_index`` over ``chunk_btree``, ``btree_v2`` and ``chunk_fixed_array``),
variable-length descriptors and global heap collections (``vlen_descriptors``,
``global_heap``), fill-value messages (``fill_value_message``).

Modules here import NumPy, the standard library, each other, and
:mod:`virtualizarr_fill.hdf5.checksum`; nothing of h5py's object model, so that the
stages above them (datasets, arrays, manifests) depend on them and never the reverse.
"""
