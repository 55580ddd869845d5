"""The TLS and SASL settings against a broker that asks for them (``secured_kafka_broker``: SASL/PLAIN over TLS
with a certificate from a test CA, and over plaintext).

* a ``kueue-es run --log kafka://...`` replica connects with ``$.kafka.security_protocol``, ``sasl`` and ``tls``
  from the environment, and decides: the lockstep scenario's committed log is the in-process reference's;
* a wrong password, an untrusted certificate and the wrong protocol for a listener end the process at once
  with an error that says which setting to look at.
"""

from __future__ import annotations

import asyncio
import os
import sys

import pytest
from conftest import SecuredBroker
from kafkahelp import fresh_topic, settings
from lockstep import LockstepDriver, Scenario, check_exactly_once, densify, reference_run
from procs import REPO, start_replica, stop_all

from connectors.kafka.settings import SaslSettings, TlsSettings

pytestmark = pytest.mark.kafka

SCENARIO = Scenario(workloads=400, per_batch=100, cluster_queues=20, cohorts=4, quota_cpu=8)


def security_env(b: SecuredBroker, protocol: str, tmp_path, password: str | None = None) -> dict[str, str]:
    env = {"KUEUE_ES_KAFKA_SECURITY_PROTOCOL": protocol, "KUEUE_ES_KAFKA_SASL_USERNAME": b.username}
    if protocol == "SASL_SSL":  # the password from a file, the CA from the test's PEM
        secret = tmp_path / "kafka-password"
        secret.write_text((password or b.password) + "\n")
        env |= {"KUEUE_ES_KAFKA_SASL_PASSWORD_FILE": str(secret), "KUEUE_ES_KAFKA_TLS_CA_FILE": str(b.ca_file)}
    else:
        env["KUEUE_ES_KAFKA_SASL_PASSWORD"] = password or b.password
    return env


@pytest.mark.asyncio
@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
async def test_the_service_decides_over_a_secured_listener(secured_kafka_broker, protocol, tmp_path) -> None:
    b = secured_kafka_broker
    ref = await reference_run(SCENARIO)
    bootstrap = b.sasl_ssl if protocol == "SASL_SSL" else b.sasl_plaintext
    tls = TlsSettings(ca_file=str(b.ca_file)) if protocol == "SASL_SSL" else TlsSettings()
    s = settings(bootstrap, fresh_topic("secured"), security_protocol=protocol, tls=tls,
                 sasl=SaslSettings(username=b.username, password=b.password))
    env = security_env(b, protocol, tmp_path)
    replicas = []

    async def on_batch(k: int) -> None:
        if k == 1:
            replicas.append(await start_replica("secured", f"kafka://{s.bootstrap}/{s.topic}", env))
            await replicas[0].wait_for("active")

    try:
        async with asyncio.timeout(180):
            result = await LockstepDriver(s, SCENARIO).run(on_batch)
    finally:
        await stop_all(replicas)
    check_exactly_once(result, SCENARIO)
    assert [r.event for r in densify(result.records)] == [r.event for r in ref.records]


async def run_until_exit(url: str, env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kueue_es", "run", "--log", url, cwd=REPO,
        env={**os.environ, "KUEUE_ES_SCHEDULER_TICKS": "false", **env},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 90)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"kueue-es run {url} kept running with settings it cannot connect with") from None
    assert proc.returncode is not None
    return proc.returncode, err.decode()


def error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("kueue-es: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.asyncio
@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
async def test_a_wrong_password_is_a_clear_error(secured_kafka_broker, protocol, tmp_path) -> None:
    b = secured_kafka_broker
    bootstrap = b.sasl_ssl if protocol == "SASL_SSL" else b.sasl_plaintext
    code, err = await run_until_exit(f"kafka://{bootstrap}/{fresh_topic('badpw')}",
                                     security_env(b, protocol, tmp_path, password="not-the-password"))
    assert code == 1
    line = error_line(err)
    assert f"{bootstrap}: SASL PLAIN authentication of user '{b.username}' failed" in line, line
    assert "Invalid username or password ($.kafka.sasl)" in line, line
    assert "not-the-password" not in err


@pytest.mark.asyncio
async def test_an_untrusted_certificate_and_a_wrong_protocol_are_clear_errors(secured_kafka_broker,
                                                                               tmp_path) -> None:
    b = secured_kafka_broker
    env = security_env(b, "SASL_SSL", tmp_path)
    del env["KUEUE_ES_KAFKA_TLS_CA_FILE"]  # the system's trust store does not know the test CA
    code, err = await run_until_exit(f"kafka://{b.sasl_ssl}/{fresh_topic('untrusted')}", env)
    assert code == 1
    line = error_line(err)
    assert f"{b.sasl_ssl}: the broker's TLS certificate is not trusted" in line, line
    assert "($.kafka.tls.ca_file)" in line, line

    # SASL without TLS against the TLS listener: the broker hangs up during the handshake.
    code, err = await run_until_exit(f"kafka://{b.sasl_ssl}/{fresh_topic('noTLS')}",
                                     security_env(b, "SASL_PLAINTEXT", tmp_path))
    assert code == 1
    line = error_line(err)
    assert f"{b.sasl_ssl}: the broker closed the connection" in line, line
    assert "does this listener speak SASL_PLAINTEXT? $.kafka.security_protocol" in line, line
