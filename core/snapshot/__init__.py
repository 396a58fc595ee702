"""Step 2b: the inventory packed for the feasibility kernel (``Snapshot``) and its write side:
built whole, or edited node by node as copy-on-write (``SnapshotEditor``)."""
