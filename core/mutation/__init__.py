"""Step 4: what the mutating webhook adds: JSONPatch ops, node affinity, scarce-resource avoidance."""
