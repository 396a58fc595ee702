"""Build a ``kubernetes.client.ApiClient`` from a kubeconfig file or the in-cluster
service account, with errors that say what was tried and what is missing.

The kubernetes client raises ``ConfigException`` with terse messages ("Invalid
kube-config file. No configuration found.", "Service host/port is not set."); the
serve command turns a ``KubeConfigError`` into one line for the user instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import kubernetes.client
import kubernetes.config
from kubernetes.config.config_exception import ConfigException

from webhook.version import user_agent

# The in-cluster loader reads these (kubernetes/config/incluster_config.py).
SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"
SERVICE_PORT_ENV = "KUBERNETES_SERVICE_PORT"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeConfigError(Exception):
    """No usable cluster connection could be configured."""


def api_client_from_kubeconfig(
    path: str | Path, *, context: str | None = None
) -> kubernetes.client.ApiClient:
    """An ApiClient for the cluster named by ``path`` (and ``context``, else the
    kubeconfig's current-context)."""
    kubeconfig = Path(path)
    if not kubeconfig.is_file():
        raise KubeConfigError(
            f"--kubeconfig: file {str(kubeconfig)!r} does not exist or is not a regular file"
        )
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_kube_config(
            config_file=str(kubeconfig),
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except ConfigException as exc:
        raise KubeConfigError(f"--kubeconfig {str(kubeconfig)!r}: {exc}") from exc
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        # A YAML file that is not a kubeconfig at all (a list, a scalar) makes the
        # loader fail on attribute access rather than with ConfigException.
        raise KubeConfigError(
            f"--kubeconfig {str(kubeconfig)!r}: not a usable kubeconfig ({type(exc).__name__}: {exc})"
        ) from exc
    return new_api_client(configuration)


def new_api_client(configuration: kubernetes.client.Configuration) -> kubernetes.client.ApiClient:
    """An ApiClient that names numagate and its version in every request's User-Agent."""
    client = kubernetes.client.ApiClient(configuration)
    client.user_agent = user_agent()
    return client


def api_client_in_cluster() -> kubernetes.client.ApiClient:
    """An ApiClient for the cluster this process runs in (service account token and CA)."""
    missing = [name for name in (SERVICE_HOST_ENV, SERVICE_PORT_ENV) if not os.environ.get(name)]
    if missing:
        raise KubeConfigError(
            "--in-cluster: not running in a Kubernetes pod: environment variable(s) "
            f"{', '.join(missing)} not set; use --kubeconfig FILE outside a cluster"
        )
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    except ConfigException as exc:
        raise KubeConfigError(
            f"--in-cluster: {exc} (expected the service account token and ca.crt in "
            f"{SERVICE_ACCOUNT_DIR}; is automountServiceAccountToken disabled?)"
        ) from exc
    return new_api_client(configuration)


def build_api_client(
    *, kubeconfig: str | Path | None = None, in_cluster: bool = False, context: str | None = None
) -> kubernetes.client.ApiClient:
    """The ApiClient for ``numagate serve --kubeconfig FILE`` or ``--in-cluster``.

    Exactly one source must be chosen: a silent fallback from a broken kubeconfig to
    the in-cluster account (or back) would watch a cluster the user did not name.
    """
    if kubeconfig is not None and in_cluster:
        raise KubeConfigError("--kubeconfig and --in-cluster are mutually exclusive; choose one")
    if kubeconfig is not None:
        return api_client_from_kubeconfig(kubeconfig, context=context)
    if in_cluster:
        return api_client_in_cluster()
    raise KubeConfigError("no cluster source given: pass --kubeconfig FILE or --in-cluster")


def describe(api_client: kubernetes.client.ApiClient) -> str:
    """Where the client points, for the startup log line (never the credentials)."""
    return str(api_client.configuration.host)
