"""aiokafka's exceptions turned into the project's errors, which say what failed and whether to retry."""

from __future__ import annotations

import asyncio
import ssl

from aiokafka.conn import create_conn
from aiokafka.errors import KafkaConnectionError, KafkaError, SaslAuthenticationFailed

from connectors.kafka.settings import KafkaSettings, client_kwargs
from events.errors import LogError


class KafkaLogError(LogError):
    """A Kafka operation failed; ``retriable`` says whether the same call may succeed later."""

    def __init__(self, message: str, retriable: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable  # type: ignore[misc]


class Fenced(KafkaLogError):
    """Another scheduler took over this shard (same transactional id, newer epoch)."""


def kafka_error(exc: BaseException, what: str) -> KafkaLogError:
    detail = str(exc) or type(exc).__name__
    retriable = bool(getattr(exc, "retriable", False)) or type(exc).__name__ in (
        "KafkaConnectionError", "KafkaTimeoutError", "RequestTimedOutError", "NodeNotReadyError",
        "NotLeaderForPartitionError", "LeaderNotAvailableError", "UnknownTopicOrPartitionError")
    if isinstance(exc, KafkaError) and type(exc).__name__ == "KafkaConnectionError":
        detail = f"no connection to the brokers ({detail})"
    return KafkaLogError(f"{what}: {detail}", retriable)


async def start_error(exc: BaseException, what: str, s: KafkaSettings) -> KafkaLogError:
    """:func:`kafka_error` for a client that could not start. When aiokafka could not bootstrap, its error names
    no cause (it only logs one per broker), so each broker is connected to once more, directly, with the same
    settings, to say why: refused, an untrusted certificate, a failed SASL authentication. The last two are
    settings to fix, not retriable."""
    if not isinstance(exc, KafkaConnectionError):
        return kafka_error(exc, what)
    causes = await unreachable_because(s)
    if not causes:
        return kafka_error(exc, what)
    retriable = not any(fatal for _, fatal in causes)
    return KafkaLogError(f"{what}: no connection to the brokers ({'; '.join(c for c, _ in causes)})", retriable)


async def unreachable_because(s: KafkaSettings) -> list[tuple[str, bool]]:
    """Why each broker of ``s.bootstrap`` cannot be connected to (nothing for one that can), and whether
    that is a setting to fix (TLS trust, SASL credentials) rather than a broker away."""
    kw = client_kwargs(s)
    del kw["bootstrap_servers"]
    out = []
    for hp in (h.strip() for h in s.bootstrap.split(",")):
        host, _, port = hp.rpartition(":")
        try:
            conn = await asyncio.wait_for(create_conn(host, int(port), **kw), s.request_timeout_ms / 1000)
        except ssl.SSLCertVerificationError as exc:
            out.append((f"{hp}: the broker's TLS certificate is not trusted: {exc.verify_message} "
                        "($.kafka.tls.ca_file)", True))
        except ssl.SSLError as exc:
            out.append((f"{hp}: TLS handshake failed: {exc.reason or exc} (does this listener speak "
                        f"{s.security_protocol}? $.kafka.security_protocol)", True))
        except SaslAuthenticationFailed as exc:
            detail = str(exc).split(": ", 1)[-1]
            out.append((f"{hp}: SASL {s.sasl.mechanism} authentication of user {s.sasl.username!r} failed: "
                        f"{detail} ($.kafka.sasl)", True))
        except ConnectionRefusedError:
            out.append((f"{hp}: connection refused", False))
        except (ConnectionResetError, KafkaConnectionError) as exc:  # hung up on during the handshake
            out.append((f"{hp}: the broker closed the connection ({str(exc) or type(exc).__name__}; does this "
                        f"listener speak {s.security_protocol}? $.kafka.security_protocol)", False))
        except (OSError, TimeoutError, KafkaError) as exc:
            out.append((f"{hp}: {str(exc) or type(exc).__name__}", False))
        else:
            conn.close()
    return out
