"""Step 1: a pod template (Pod or workload) and its annotations -> PodIntent, with findings."""
