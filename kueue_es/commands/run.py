"""``kueue-es run``: the scheduler as a service over the embedded log or Apache Kafka."""

from __future__ import annotations

import argparse
import os
from typing import Any

from connectors.kafka.settings import is_kafka_url
from events.errors import InvalidInput
from kueue_es import config
from kueue_es.commands._common import embedded_log_dir, path_arg


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run",
        help="run the scheduler as a service (embedded log by default, or --log kafka://HOST:PORT/TOPIC)",
        description="Run the scheduler until SIGTERM/SIGINT. With --log kafka://HOST:PORT/TOPIC it is one "
        "replica of the Kafka scheduler service: one active replica per shard, decisions committed in Kafka "
        "transactions, standbys take over when the active one dies. Without --log it schedules over the "
        "embedded log (a directory; default ./kueue-es-log). Settings come from --config FILE (YAML; or "
        "KUEUE_ES_CONFIG), then KUEUE_ES_* environment variables (KUEUE_ES_KAFKA_BOOTSTRAP, "
        "KUEUE_ES_KAFKA_SASL_PASSWORD, ...), then flags. Reports progress as JSON lines on stdout.",
    )
    p.add_argument("--log", type=path_arg, metavar="URL|PATH", help="kafka://HOST:PORT[,HOST:PORT]/TOPIC or a log directory")
    p.add_argument("--config", type=path_arg, metavar="FILE", help="kueue-es settings (YAML)")
    p.add_argument("--kueue-config", type=path_arg, metavar="FILE", help="Kueue Configuration (config.kueue.x-k8s.io)")
    p.add_argument("--instance-id", type=_instance_id, metavar="NAME", help="this replica's name (default HOSTNAME-PID)")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve Kueue's Prometheus metrics on http://0.0.0.0:PORT/metrics (default: not served)")
    k = p.add_argument_group("Kubernetes (--kube)")
    k.add_argument("--kube", action="store_true", default=None,
                   help="also run the Kubernetes connector: watch the cluster, write Workload status, drive Jobs "
                   "(leader-elected through a Lease; /healthz and /readyz)")
    k.add_argument("--kubeconfig", type=path_arg, metavar="FILE", help="kubeconfig (default $KUBECONFIG, ~/.kube/config or in-cluster)")
    k.add_argument("--health-port", type=int, metavar="PORT", help="port of /healthz and /readyz (default 8081; 0: off)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    overrides: dict[str, Any] = {}
    if args.log:
        overrides["log"] = args.log
    scheduler: dict[str, Any] = {}
    if args.kueue_config:
        scheduler["kueue_config"] = args.kueue_config
    if args.instance_id is not None:
        scheduler["instance_id"] = args.instance_id
    if scheduler:
        overrides["scheduler"] = scheduler
    kube = {key: value for key, value in (("enabled", getattr(args, "kube", None)),
                                          ("kubeconfig", getattr(args, "kubeconfig", None)),
                                          ("health_port", getattr(args, "health_port", None))) if value is not None}
    if kube:
        overrides["kube"] = kube
    if getattr(args, "metrics_port", None) is not None:
        overrides["metrics"] = {"port": args.metrics_port}
    settings = config.load(args.config, overrides=overrides)
    if not settings.kube.enabled:
        for flag in ("kubeconfig", "health_port"):
            if getattr(args, flag, None) is not None:
                raise InvalidInput(f"--{flag.replace('_', '-')} goes with --kube (or kube.enabled in the settings); "
                                   "without it there is no Kubernetes connector to use it")
    log = settings.log or config.DEFAULT_EMBEDDED_LOG
    if not is_kafka_url(log) and os.path.exists(log):
        embedded_log_dir(log)  # a directory of other files gets no log scattered among them (a missing one: created)
    from kueue_es import service  # imports aiokafka: only when actually running

    return service.run(settings)


def _instance_id(text: str) -> str:
    """``--instance-id ""`` (an unset ``$POD_NAME``) is misuse, not the flag left out: the replica would run under
    the default name while its operator thinks it runs under the one meant."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"empty name: {text!r}")
    return text
