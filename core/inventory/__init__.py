"""Step 2: Kubernetes objects (Node, NRT, Volcano Numatopology, bound Pods) -> NodeTopology per node."""
