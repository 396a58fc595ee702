# The kernel vocabulary for the compiled kernel (_kernel_c.pyx): the same values as
# core/feasibility/codes.py, which defines them; tests/core/feasibility/test_codes.py
# compares the two through _kernel_c.PXD_CODES. Declared as C enums (compile-time
# constants, no Python lookups in the inner loops), replacing the deprecated DEF.

cdef enum:
    P_NONE = 0
    P_BEST_EFFORT = 1
    P_RESTRICTED = 2
    P_SINGLE = 3

cdef enum:
    RES_CPU = 0
    RES_MEMORY = 1
    RES_DEVICE = 2
    RES_IGNORED = 3

cdef enum:
    F_EMPTY = 1
    F_POD_SCOPE = 2
    F_EXCLUSIVE = 4
    F_CPU_ONLY = 8
    F_KOORD_HINTS = 16
    F_KOORD_REQUESTS = 32

cdef enum:
    SF_N = 0
    SF_TOPO_OFF = 1
    SF_MAX_NUMA = 2
    SF_PREFER_CLOSEST = 3
    SF_CPU_STATIC = 4
    SF_FULL_PCPUS = 5
    SF_THREADS = 6
    SF_MEM_STATIC = 7
    SHAPE_FIELDS = 8

cdef enum:
    U_INIT = 0
    U_SIDECAR = 1
    U_APP = 2

cdef enum:
    L_DONTCARE = 0
    L_IMPOSSIBLE = 1
    L_HINTS = 2

cdef enum:
    R_OK = 0
    R_TOO_MANY_NUMA = 1
    R_NODE_SHORT = 2
    R_NOT_PREFERRED = 3
    R_SINGLE_NO_HINT = 4
    R_CPU_SHORT = 5
    R_SMT = 6
    R_DEVICE_SHORT = 7
    R_MEMORY_SHORT = 8
    R_EXCLUSIVE = 9
    R_TOO_LARGE = 10

cdef enum:
    MAX_ENUM_NUMA = 12
