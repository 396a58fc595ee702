"""The one builder of ``kubernetes.client.ApiClient`` for ``serve``, ``certs`` and the CLI,
with kubectl's rules (README, "Cluster access"); the client's terse ``ConfigException``s
become one :class:`KubeConfigError` line naming the file and the problem."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import kubernetes.client
import kubernetes.config
import yaml
from kubernetes.config.config_exception import ConfigException

from webhook.version import user_agent

# The in-cluster loader reads these (kubernetes/config/incluster_config.py).
SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"
SERVICE_PORT_ENV = "KUBERNETES_SERVICE_PORT"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
KUBECONFIG_ENV = "KUBECONFIG"
DEFAULT_KUBECONFIG = "~/.kube/config"


class KubeConfigError(Exception):
    """No usable cluster connection could be configured."""


@dataclass(frozen=True)
class KubeconfigSource:
    """The kubeconfig path(s) to load and how the user named them (for messages)."""

    paths: str
    origin: str  # "--kubeconfig", "$KUBECONFIG" or "~/.kube/config"

    def label(self) -> str:
        return f"{self.origin} {self.paths!r}" if self.origin != self.paths else self.paths


def default_kubeconfig() -> KubeconfigSource | None:
    """``$KUBECONFIG`` if set (at least one of its files must exist), else
    ``~/.kube/config`` if it exists, else None."""
    env = os.environ.get(KUBECONFIG_ENV, "")
    if env:
        return KubeconfigSource(env, "$KUBECONFIG")
    home = Path(DEFAULT_KUBECONFIG).expanduser()
    return KubeconfigSource(str(home), DEFAULT_KUBECONFIG) if home.is_file() else None


def _check_files(source: KubeconfigSource) -> None:
    paths = [Path(p).expanduser() for p in source.paths.split(os.pathsep) if p]
    if not any(p.is_file() for p in paths):
        what = "does not exist or is not a regular file"
        if len(paths) > 1:
            what = "names no existing file"
        raise KubeConfigError(f"{source.label()}: {what}")


def api_client_from_kubeconfig(
    path: str | Path | KubeconfigSource, *, context: str | None = None
) -> kubernetes.client.ApiClient:
    """An ApiClient for the cluster of ``path``'s ``context`` (else its current-context),
    checked: the file exists and parses, the context exists, the server is a URL."""
    source = (
        path if isinstance(path, KubeconfigSource) else KubeconfigSource(str(path), "--kubeconfig")
    )
    _check_files(source)
    configuration = kubernetes.client.Configuration()
    where = source.label() + (f", context {context!r}" if context else "")
    try:
        kubernetes.config.load_kube_config(
            config_file=source.paths,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except ConfigException as exc:
        raise KubeConfigError(f"{where}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise KubeConfigError(f"{where}: not a usable kubeconfig (not YAML: {exc})") from exc
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        # A YAML file that is not a kubeconfig at all (a list, a scalar) makes the
        # loader fail on attribute access rather than with ConfigException.
        raise KubeConfigError(
            f"{where}: not a usable kubeconfig ({type(exc).__name__}: {exc})"
        ) from exc
    url = urlparse(str(configuration.host))
    if url.scheme not in ("https", "http") or not url.netloc:
        raise KubeConfigError(
            f"{where}: the cluster's server {configuration.host!r} is not an https:// URL"
        )
    return new_api_client(configuration)


def new_api_client(configuration: kubernetes.client.Configuration) -> kubernetes.client.ApiClient:
    """An ApiClient that names numagate and its version in every request's User-Agent."""
    client = kubernetes.client.ApiClient(configuration)
    client.user_agent = user_agent()
    return client


def in_cluster_available(sa_dir: Path = SERVICE_ACCOUNT_DIR) -> bool:
    return bool(os.environ.get(SERVICE_HOST_ENV)) and (sa_dir / "token").is_file()


def api_client_in_cluster(sa_dir: Path = SERVICE_ACCOUNT_DIR) -> kubernetes.client.ApiClient:
    """An ApiClient for the cluster this process runs in (service account token and CA)."""
    missing = [name for name in (SERVICE_HOST_ENV, SERVICE_PORT_ENV) if not os.environ.get(name)]
    if missing:
        raise KubeConfigError(
            "--in-cluster: not running in a Kubernetes pod: environment variable(s) "
            f"{', '.join(missing)} not set; use --kubeconfig FILE outside a cluster"
        )
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.incluster_config.InClusterConfigLoader(
            token_filename=str(sa_dir / "token"), cert_filename=str(sa_dir / "ca.crt")
        ).load_and_set(configuration)
    except ConfigException as exc:
        raise KubeConfigError(
            f"--in-cluster: {exc} (expected the service account token and ca.crt in "
            f"{sa_dir}; is automountServiceAccountToken disabled?)"
        ) from exc
    return new_api_client(configuration)


def build_api_client(
    *,
    kubeconfig: str | Path | None = None,
    context: str | None = None,
    in_cluster: bool = False,
    use_default: bool = True,
    in_cluster_fallback: bool = False,
    sa_dir: Path = SERVICE_ACCOUNT_DIR,
) -> kubernetes.client.ApiClient:
    """The ApiClient by kubectl's rules (README, "Cluster access"). ``use_default``: look at
    ``$KUBECONFIG`` and ``~/.kube/config`` when no file is named (``serve`` does not: with no
    source it serves the demo inventory); ``in_cluster_fallback``: then try the service
    account (``certs`` in a Job). A named source that is broken is an error, never a
    silent switch to another cluster."""
    if kubeconfig is not None and in_cluster:
        raise KubeConfigError("--kubeconfig and --in-cluster are mutually exclusive; choose one")
    if in_cluster:
        if context:
            raise KubeConfigError(
                "--context needs a kubeconfig; it has no meaning with --in-cluster"
            )
        return api_client_in_cluster(sa_dir)
    if kubeconfig is not None:
        return api_client_from_kubeconfig(kubeconfig, context=context)
    found = default_kubeconfig() if use_default else None
    if found is not None:
        return api_client_from_kubeconfig(found, context=context)
    if in_cluster_fallback and not context and in_cluster_available(sa_dir):
        return api_client_in_cluster(sa_dir)
    tried = "pass --kubeconfig FILE or --in-cluster"
    if use_default:
        tried += f", set ${KUBECONFIG_ENV}, or create {DEFAULT_KUBECONFIG}"
        if in_cluster_fallback:
            tried += " (or run in a pod with a service account token)"
    raise KubeConfigError(f"no cluster configuration: {tried}")


def default_namespace(kubeconfig: str | Path | None = None, context: str | None = None) -> str:
    """The namespace kubectl would use without ``-n``: the context's ``namespace``, else
    ``default`` (also when no kubeconfig is found: the client's error comes first)."""
    source = (
        KubeconfigSource(str(kubeconfig), "--kubeconfig")
        if kubeconfig is not None
        else default_kubeconfig()
    )
    if source is None:
        return "default"
    try:
        contexts, active = kubernetes.config.list_kube_config_contexts(config_file=source.paths)
    except (ConfigException, OSError, ValueError, TypeError, AttributeError, yaml.YAMLError):
        return "default"
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"


def describe(api_client: kubernetes.client.ApiClient) -> str:
    """Where the client points, for the startup log line (never the credentials)."""
    return str(api_client.configuration.host)
