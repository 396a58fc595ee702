"""Dynamic Resource Allocation in the webhook: the DRA objects (ResourceSlices,
DeviceClasses, ResourceClaims, ResourceClaimTemplates) read from the inventory file or
watched live (``state``), and a pod's claims judged in ``/validate`` (``admission``) with
the pure rules of core/dra (docs/dra.md)."""
