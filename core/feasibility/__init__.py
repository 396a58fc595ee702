"""Step 3: PodIntent x inventory snapshot -> one verdict per node (kubelet rules), then the decision."""
