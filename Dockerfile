# syntax=docker/dockerfile:1
# numagate image: the wheel is built with the compiled (Cython) feasibility core in a
# build stage with a compiler; the runtime stage has no compiler and runs as UID 65532.
#   make image     (docker build --build-arg VERSION=<webhook/version.py> -t numagate:VERSION .)
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
# From webhook/version.py, the one version source: the build stops if they differ.
ARG VERSION

FROM ${PYTHON_IMAGE} AS build
ARG VERSION
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py constraints.txt ./
COPY core/ core/
COPY webhook/ webhook/
COPY certs/ certs/
COPY schemas/ schemas/
# NUMAGATE_NO_EXTENSIONS is deliberately unset: setup.py compiles the core or fails the
# build (no silent pure-Python fallback). The wheels of every dependency land beside ours,
# at the versions in constraints.txt (PIP_CONSTRAINT also pins the isolated build's Cython).
RUN PIP_CONSTRAINT=/src/constraints.txt pip wheel --no-cache-dir --wheel-dir /wheels . \
 && cp constraints.txt /wheels/ \
 && VERSION="$VERSION" python - <<'PY'
import glob, os, zipfile
from webhook.version import __version__
assert os.environ["VERSION"] == __version__, \
    f"--build-arg VERSION={os.environ['VERSION']!r} but webhook/version.py says {__version__!r}"
wheel = glob.glob("/wheels/numagate-*.whl")[0]
names = zipfile.ZipFile(wheel).namelist()
assert any(n.startswith("core/feasibility/_kernel_c") and n.endswith(".so") for n in names), \
    f"compiled core missing from {wheel}"
PY

FROM ${PYTHON_IMAGE}
ARG VERSION
LABEL org.opencontainers.image.title="numagate" \
      org.opencontainers.image.version="${VERSION}"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels -c /wheels/constraints.txt numagate \
 && python -c "import core.feasibility._kernel_c" \
 && test "$(numagate --version)" = "numagate ${VERSION}"
# Non-root, matching runAsUser/runAsGroup in manifests/; no files are written at run
# time except under the mounted /tmp (readOnlyRootFilesystem).
USER 65532:65532
WORKDIR /tmp
EXPOSE 8443
ENTRYPOINT ["numagate"]
CMD ["serve", "--host=0.0.0.0", "--in-cluster"]
