"""Dynamic Resource Allocation (resource.k8s.io/v1): ResourceSlices, DeviceClasses,
ResourceClaims and ResourceClaimTemplates (``objects``, read from plain objects by ``read``),
the devices a node can reach (``pools``), CEL device selectors (``selectors``), the
allocator's search (``allocate``), a pod's claims judged per node (``evaluate``), extended
resources served by DRA (``extended``) and the Topology Manager's blind spot for DRA
devices (``topology``). The rules follow
k8s.io/dynamic-resource-allocation/structured at v0.36.3; docs/dra.md says what is checked
and what is left unchecked."""
