"""The kubernetes manager's seam to the Kubernetes API, through lightkube's asyncio client (docs/dependencies.md says
why lightkube): the configuration as kubectl finds it (`--k8s-kubeconfig` and `--k8s-context`, else the pod's service
account inside a cluster, else $KUBECONFIG or ~/.kube/config), and calls retried as a client should: 429 (after the
server's Retry-After), 409 Conflict, 5xx and a connection that failed, with back-off; anything else (403, 404,
422 ...) raised at once as a `KubeError` naming the API's own reason.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from lightkube import ApiError, AsyncClient, ConfigError, KubeConfig
from lightkube.config.kubeconfig import SingleConfig

from scaler.config.sections import KubernetesWorkerManagerConfig

logger = logging.getLogger(__name__)
# the HTTP client logs every request at INFO: the manager says what matters itself
for _name in ("httpx2", "httpx", "httpcore2", "httpcore"):
    logging.getLogger(_name).setLevel(logging.WARNING)
T = TypeVar("T")
#: Answers worth the same request again (after a pause): too many requests, a conflict, the server's own trouble.
RETRIED_CODES = frozenset({409, 429, 500, 502, 503, 504})
#: How often a retried call is tried in all, and the first pause (doubling).
ATTEMPTS = 4
FIRST_PAUSE_SECONDS = 0.5


class KubeError(Exception):
    """A call the API refused (or that never reached it), in one line: the API's reason and words."""

    def __init__(self, text: str, code: int = 0, reason: str = "") -> None:
        super().__init__(text)
        self.code = code  #: the HTTP code; 0 when the API server did not answer
        self.reason = reason  #: the Status reason (Forbidden, NotFound, AlreadyExists ...)


@dataclass(frozen=True, slots=True)
class Connection:
    config: SingleConfig
    namespace: str
    where: str  #: for messages: the kubeconfig file and context, or "the pod's service account"


def connection_of(settings: KubernetesWorkerManagerConfig) -> Connection:
    """The cluster and namespace the settings name; KubeError naming the setting when they name none."""
    try:
        if settings.k8s_kubeconfig:
            path = Path(settings.k8s_kubeconfig).expanduser()
            if not path.is_file():
                raise KubeError(f"--k8s-kubeconfig {settings.k8s_kubeconfig}: no such file")
            kubeconfig = read_kubeconfig(path)
            where = f"kubeconfig {path}"
        else:
            kubeconfig = _kubeconfig_of_the_environment()
            where = "the pod's service account" if kubeconfig.fname is None else f"kubeconfig {kubeconfig.fname}"
        single = kubeconfig.get(context_name=settings.k8s_context) if settings.k8s_context else kubeconfig.get()
    except ConfigError as error:
        setting = "--k8s-context" if settings.k8s_context and "context" in str(error).lower() else "--k8s-kubeconfig"
        raise KubeError(f"{setting}: {error}") from None
    except (OSError, ValueError, KeyError) as error:
        raise KubeError(f"--k8s-kubeconfig: cannot read the Kubernetes configuration: {error}") from None
    if single is None:
        raise KubeError("--k8s-context: the kubeconfig has no current context; name one")
    if settings.k8s_context:
        where += f", context {settings.k8s_context}"
    namespace = settings.k8s_namespace or single.namespace or "default"
    return Connection(single, namespace, where)


def read_kubeconfig(path: Path) -> KubeConfig:
    """The kubeconfig at `path`; KubeError naming the file, what is wrong with it and what to do, when it is not YAML
    or not a kubeconfig (lightkube raises PyYAML's errors, and a bare KeyError for a missing section)."""
    import yaml  # type: ignore[import-untyped]  # a dependency of lightkube; its stubs are not installed

    fix = "give the kubeconfig kubectl uses (`kubectl config view --raw > FILE` writes it)"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or type(error).__name__
        raise KubeError(f"--k8s-kubeconfig {path}: not YAML{at} ({problem}): {fix}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise KubeError(f"--k8s-kubeconfig {path}: cannot be read ({error}): {fix}") from None
    missing = [key for key in ("clusters", "contexts") if not isinstance(data, dict) or not data.get(key)]
    if missing:
        raise KubeError(f"--k8s-kubeconfig {path}: not a kubeconfig (it has no {' and no '.join(missing)}): {fix}")
    return KubeConfig.from_dict(data, fname=path)


def _kubeconfig_of_the_environment() -> KubeConfig:
    """As kubectl finds it: the pod's service account inside a cluster, else $KUBECONFIG or ~/.kube/config."""
    try:
        return KubeConfig.from_service_account()
    except ConfigError:
        pass
    path = Path(os.environ.get("KUBECONFIG") or "~/.kube/config").expanduser()
    if not path.is_file():
        raise KubeError(
            f"--k8s-kubeconfig: none given, not in a pod, and no {path} ($KUBECONFIG or ~/.kube/config): name one"
        )
    return read_kubeconfig(path)


def new_client(connection: Connection) -> AsyncClient:
    return AsyncClient(connection.config, namespace=connection.namespace, field_manager="scaler")


def describe(error: BaseException, connection: Connection | None = None) -> KubeError:
    """One line for a failed call: the API's code, reason and words, or why it never answered."""
    if isinstance(error, KubeError):
        return error
    if isinstance(error, ApiError):
        status = error.status
        code = int(status.code or 0)
        return KubeError(f"{status.reason or 'Failure'} ({code}): {status.message}", code, str(status.reason or ""))
    response = getattr(error, "response", None)
    code = getattr(response, "status_code", 0) if response is not None else 0
    if isinstance(code, int) and code >= 400:  # an HTTP error the library did not turn into an ApiError (a watch's)
        try:
            body = response.json() if response is not None else {}
        except Exception:
            body = {}
        body = body if isinstance(body, dict) else {}
        reason = str(body.get("reason") or getattr(response, "reason_phrase", "") or "Failure")
        return KubeError(f"{reason} ({code}): {body.get('message') or error}", code, reason)
    server = connection.config.cluster.server if connection is not None else "the Kubernetes API server"
    where = f" ({connection.where})" if connection is not None else ""
    return KubeError(f"the Kubernetes API at {server}{where} does not answer: {type(error).__name__}: {error}")


def _retry_after(error: ApiError) -> float | None:
    response = getattr(error, "response", None)
    value = response.headers.get("Retry-After") if response is not None else None
    try:
        return float(value) if value else None
    except ValueError:
        return None


async def retried(call: Callable[[], Awaitable[T]], what: str, connection: Connection | None = None) -> T:
    """`call()`, again after a pause when the answer is worth it (RETRIED_CODES, no answer); KubeError otherwise."""
    pause = FIRST_PAUSE_SECONDS
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return await call()
        except ApiError as error:
            code = int(error.status.code or 0)
            if code not in RETRIED_CODES or error.status.reason == "AlreadyExists" or attempt == ATTEMPTS:
                raise describe(error, connection) from None
            wait = _retry_after(error) or pause
        except (asyncio.CancelledError, KubeError):
            raise
        except Exception as error:  # the server did not answer (connection refused, reset, timed out)
            if attempt == ATTEMPTS:
                raise describe(error, connection) from None
            wait = pause
        logger.debug("%s: attempt %d failed; again in %g s", what, attempt, wait)
        await asyncio.sleep(wait)
        pause *= 2
    raise AssertionError("unreachable")


def as_dict(resource: Any) -> dict[str, Any]:
    """A lightkube resource as the API's JSON (camelCase keys, as the pod helpers read them)."""
    found = resource.to_dict()
    assert isinstance(found, dict)
    return found
